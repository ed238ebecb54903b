"""Starting, stopping and asking about the daemon of one address (`toolshell daemon …`, and
`[cli] keep_warm`, which starts one on first use)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import stat
import subprocess
import sys
import time
from typing import Any

from toolshell.frontends.daemon import wire
from toolshell.frontends.daemon.address import Address, address_for
from toolshell.frontends.daemon.client import ask
from toolshell.frontends.daemon.folder import DaemonError, prepare_folder

READY_TIMEOUT = 120.0
"""How long `daemon start` waits for the host to open (slow servers go on starting after it)."""
STOP_TIMEOUT = 30.0
MAX_LOG_BYTES = 1_000_000
"""A log past this is started afresh when a daemon starts."""


def locate(config_path: str | None, state_dir: str | None) -> Address:
    """The address of the daemon for these options here.

    Raises:
        DaemonError: it cannot be told without loading the config.
    """
    address = address_for(config_path, state_dir)
    if address is None:
        raise DaemonError("the config's [state] dir uses ${VAR}; give --state-dir to run a daemon for it")
    return address


def status(address: Address) -> dict[str, Any] | None:
    """The running daemon's status, or None when none runs for this address."""
    answer = ask(address, "status")
    return None if answer is None else answer.get("status")


def start(
    config_path: str | None,
    state_dir: str | None,
    idle_seconds: float | None = None,
    *,
    wait: bool = True,
    _again: bool = True,
) -> dict[str, Any]:
    """Start the daemon for these options in the background; with `wait`, return its status once
    it serves (`already` is true when one was running). Without, return at once (`keep_warm`).

    Raises:
        DaemonError: it could not start (the reason, and the log's last lines).
    """
    address = locate(config_path, state_dir)
    prepare_folder(address)
    running = status(address)
    if running is not None:
        return {**running, "already": True}
    if not wait and (_locked(address) or _failed_lately(address)):
        return {"starting": True, **address.shown()}  # one is starting; or starting failed lately: said once
    command = [sys.executable, "-m", "toolshell.frontends.daemon.process"]
    command += ["--config", config_path] if config_path else []
    command += ["--state-dir", state_dir] if state_dir else []
    command += ["--idle-seconds", repr(idle_seconds)] if idle_seconds is not None else []
    read_end, write_end = os.pipe() if wait else (-1, -1)
    if wait:
        command += ["--ready-fd", str(write_end)]
    log = _open_log(address)
    try:
        subprocess.Popen(
            command,
            cwd=address.cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            pass_fds=(write_end,) if wait else (),
            start_new_session=True,  # it outlives this command and its terminal
        )
    finally:
        os.close(log)
        if wait:
            os.close(write_end)
    if not wait:
        return {"starting": True, **address.shown()}
    try:
        said = _read_line(read_end, READY_TIMEOUT)
    finally:
        os.close(read_end)
    if said is None:
        raise DaemonError(f"the daemon did not start{_log_tail(address)}")
    message = wire.decode(said)
    if message.get("already"):  # another start won the lock: report the daemon it starts
        found = _wait_for_status(address)
        if found is None and _again:  # it was stopping, not starting: start one now
            return start(config_path, state_dir, idle_seconds, _again=False)
        if found is None:
            raise DaemonError(f"another daemon start did not finish{_log_tail(address)}")
        return {**found, "already": True}
    if "error" in message:
        raise DaemonError(str(message["error"]))
    with contextlib.suppress(FileNotFoundError):
        os.unlink(_failed(address))
    return status(address) or {"pid": message.get("pid"), **address.shown()}


def note_failure(address: Address, why: str) -> bool:
    """Remember that `keep_warm` could not start this daemon; True the first time (say it then)."""
    try:
        os.makedirs(address.folder, mode=0o700, exist_ok=True)
        info = os.lstat(address.folder)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            return True  # never written through a link or into another user's folder: said each time
        if _failed_lately(address):
            return False
        with contextlib.suppress(FileNotFoundError):
            os.unlink(_failed(address))  # an old one: this failure is said again
        fd = os.open(_failed(address), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return False
    except OSError:
        return True  # nowhere to remember it: said each time
    with os.fdopen(fd, "w") as f:
        f.write(why + "\n")
    return True


def _failed(address: Address) -> str:
    """Marks that `keep_warm` failed to start this daemon (`daemon start` clears it)."""
    return os.path.join(address.folder, f"{address.key}.failed")


def _wait_for_status(address: Address) -> dict[str, Any] | None:
    """The status of the daemon another start is starting; None when the lock was let go first."""
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        found = status(address)
        if found is not None:
            return found
        if not _locked(address):
            return None  # the other one gave up, or was a daemon stopping
        time.sleep(0.1)
    raise DaemonError(f"another daemon start did not finish{_log_tail(address)}")


def holder(address: Address) -> str | None:
    """The pid written in the lock a daemon holds, or None when no daemon holds it."""
    if not _locked(address):
        return None
    try:
        with open(address.lock, encoding="ascii", errors="replace") as f:
            return f.read(32).strip() or "?"
    except OSError:
        return "?"


FAILED_RETRY_SECONDS = 600.0
"""After `keep_warm` failed to start a daemon, how long it waits before trying again."""


def _failed_lately(address: Address) -> bool:
    try:
        return time.time() - os.lstat(_failed(address)).st_mtime < FAILED_RETRY_SECONDS
    except OSError:
        return False


def stop(address: Address) -> dict[str, Any] | None:
    """Stop the running daemon and wait until it has exited; its last status, or None when none ran."""
    last = status(address)
    if last is None:
        return None
    ask(address, "stop")
    deadline = time.monotonic() + STOP_TIMEOUT
    while time.monotonic() < deadline and _locked(address):
        time.sleep(0.05)  # the daemon closes its servers, then lets go of its lock
    return last


def _locked(address: Address) -> bool:
    """Whether a daemon still holds the address's lock."""
    try:
        fd = os.open(address.lock, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _open_log(address: Address) -> int:
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
    try:
        if os.stat(address.log).st_size > MAX_LOG_BYTES:
            flags |= os.O_TRUNC
    except FileNotFoundError:
        pass
    return os.open(address.log, flags, 0o600)


def _read_line(fd: int, timeout: float) -> bytes | None:
    """One line from a pipe, or None when it closes first or `timeout` passes."""
    data = b""
    deadline = time.monotonic() + timeout
    while not data.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 65536)
        if not chunk:
            return None
        data += chunk
    return data


def _log_tail(address: Address, lines: int = 5) -> str:
    try:
        with open(address.log, encoding="utf-8", errors="replace") as f:
            tail = f.read().splitlines()[-lines:]
    except OSError:
        return ""
    return (f"; its log {address.log} ends:\n  " + "\n  ".join(tail)) if tail else ""
