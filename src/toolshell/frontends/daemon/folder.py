"""The daemon's files: a folder of its own user's in the state dir, and the lock that makes one
daemon per address."""

from __future__ import annotations

import fcntl
import os
import stat

from toolshell.frontends.daemon.address import Address


class DaemonError(Exception):
    """Why a daemon cannot start here: one line for the person who asked."""


class AlreadyRunning(DaemonError):
    """Another daemon holds this address's lock (it may still be starting)."""


def hold_lock(address: Address) -> int:
    """Take the address's lock for this process's life (one daemon per address); its fd.

    Raises:
        DaemonError: another daemon holds it.
    """
    fd = os.open(address.lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        held_by = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise AlreadyRunning(f"a daemon already serves this (pid {held_by}); see `toolshell daemon status`") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


def prepare_folder(address: Address) -> None:
    """The daemons' folder, private to this user.

    Raises:
        DaemonError: the socket path is too long, or the folder is not this user's own.
    """
    if (too_long := address.socket_too_long()) is not None:
        raise DaemonError(too_long)
    for folder in (address.state_dir, address.folder):  # made private, as a cold command makes its state dir
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
        except OSError as e:
            raise DaemonError(f"cannot make {folder}: {e.strerror}; give a --state-dir you can write") from None
    info = os.lstat(address.folder)  # a symlink planted in a shared state dir is never followed
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        raise DaemonError(
            f"{address.folder} is not a folder of your own (a link, or another user's); "
            "remove it, or give a --state-dir of your own"
        )
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(address.folder, 0o700, follow_symlinks=False)
