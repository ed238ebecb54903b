"""What a stdio server needs beyond the SDK's `stdio_client`: its stderr, and no orphans.

- stderr goes into a pipe that a reader task drains into the last `STDERR_LINES` lines, shown in
  diagnostics and in the error of a server that died.
- `stdio_client` closes stdin, waits, then kills the process tree only if the server does not
  exit by itself, so the children of a server that exits cleanly live on. Each server is started
  with a token in its environment; at close we find its process group (it leads one: the SDK starts
  it with `start_new_session`) and every process still carrying the token, and end them.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import os
import signal
import uuid
from collections import deque
from pathlib import Path

import anyio

STDERR_LINES = 50
TOKEN_ENV = "TOOLSHELL_SERVER_TOKEN"
_TERM_GRACE = 2.0
_POLL = 0.02
_WATCH_EVERY = 0.1
_PROCFS = Path("/proc").is_dir()


class StderrTail:
    """A pipe for a child's stderr and the last lines read from it (`lines` may be shared)."""

    def __init__(self, lines: deque[str] | None = None) -> None:
        self.lines: deque[str] = deque(maxlen=STDERR_LINES) if lines is None else lines
        self._partial = ""
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")  # chunks split characters
        self._read_fd: int | None = None
        self._write_file: io.TextIOWrapper | None = None

    def open(self) -> io.TextIOWrapper:
        """A fresh pipe; returns the write end to hand to the child as `errlog`."""
        read_fd, write_fd = os.pipe()
        os.set_blocking(read_fd, False)
        self._read_fd = read_fd
        self._write_file = open(write_fd, "w", encoding="utf-8", closefd=True)
        return self._write_file

    def release_write_end(self) -> None:
        """Drop our copy of the write end once the child has its own, so EOF can arrive."""
        if self._write_file is not None:
            self._write_file.close()
            self._write_file = None

    async def pump(self) -> None:
        """Read until EOF (the child and everything that inherited the pipe are gone)."""
        fd = self._read_fd
        while fd is not None and fd == self._read_fd:
            await anyio.wait_readable(fd)
            if not self.drain():
                return

    def drain(self) -> bool:
        """Read what is there now without waiting. False at EOF or once closed."""
        fd = self._read_fd
        while fd is not None:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                return True
            except OSError:
                return False
            if not chunk:
                self._flush_partial()
                return False
            self._add(self._decoder.decode(chunk))
        return False

    def close(self) -> None:
        self.release_write_end()
        if self._read_fd is not None:
            self.drain()
            self._flush_partial()
            with contextlib.suppress(OSError):
                os.close(self._read_fd)
            self._read_fd = None

    def _add(self, text: str) -> None:
        parts = (self._partial + text).split("\n")
        self._partial = parts.pop()
        self.lines.extend(p.rstrip("\r") for p in parts)

    def _flush_partial(self) -> None:
        if self._partial:
            self.lines.append(self._partial)
            self._partial = ""


def new_token() -> str:
    return uuid.uuid4().hex


def _stat_fields(pid: str) -> list[str]:
    """`/proc/PID/stat` after the command name: state, ppid, pgrp, …"""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _members(leader: int | None, token: str) -> list[int]:
    """Live (non-zombie) processes in the server's group or carrying its token."""
    needle = f"{TOKEN_ENV}={token}".encode()
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            state, _ppid, pgrp = _stat_fields(entry.name)[:3]
            if state == "Z":
                continue
            if int(pgrp) == leader or needle in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
    return found


def find_leader(token: str) -> int | None:
    """The pid of our direct child that carries `token`: the server, leader of its process group."""
    me = str(os.getpid())
    needle = f"{TOKEN_ENV}={token}".encode()
    for entry in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError, IndexError):
            if _stat_fields(entry.name)[1] == me and needle in (entry / "environ").read_bytes().split(b"\0"):
                return int(entry.name)
    return None


def is_alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie has exited: it only waits to be reaped)."""
    try:
        return _stat_fields(str(pid))[0] != "Z"
    except (OSError, IndexError):
        return False


async def wait_exit(pid: int | None) -> None:
    """Return once the process has exited. Needed because a child that inherited the server's
    stdout keeps the pipe open, so EOF never tells us the server died."""
    if pid is None or not _PROCFS:
        await anyio.sleep_forever()
    while is_alive(pid or 0):  # noqa: ASYNC110 - no event tells us a process we did not reap has died
        await anyio.sleep(_WATCH_EVERY)


def kill_now(token: str) -> None:
    """SIGKILL every process carrying `token` (a server that will not even answer the handshake)."""
    if _PROCFS:
        _signal(_members(None, token), signal.SIGKILL)


def _signal(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


async def end_process_tree(leader: int | None, token: str) -> None:
    """SIGTERM whatever is left of a server's processes, then SIGKILL after a bounded grace."""
    if not _PROCFS:  # no procfs: the SDK's own tree kill is all we have
        return
    left = _members(leader, token)
    if not left:
        return
    _signal(left, signal.SIGTERM)
    with anyio.move_on_after(_TERM_GRACE):
        while left := _members(leader, token):  # noqa: ASYNC110 - orphans are not our children to wait for
            await anyio.sleep(_POLL)
        return
    _signal(left, signal.SIGKILL)
