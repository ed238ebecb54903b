"""`toolshell serve --http --processes N`: N worker processes behind one port, one deployment unit.

One Python process uses one core. Every call's state is in the store (the SQLite file, or
PostgreSQL), so the workers of one machine act as one server the way a fleet's do
(docs/scale-out.md); `--processes` only saves running and routing N servers by hand.

The parent is a supervisor and serves nothing itself. Before any worker starts it binds N
listening sockets to the port with `SO_REUSEPORT` and hands worker i socket i: the kernel spreads
new connections over the sockets by a hash of their addresses, so each worker gets its share
(one shared socket would wake whichever worker waits longest, and keep-alive connections would
pile onto it). The parent keeps every socket open, so the port is never unbound and the
connections queued on a worker that dies wait for the worker started in its place, on the same
socket. A port already in use fails once, before anything starts.

- **Ready**: each worker sets its byte in a small shared memory file once it serves, and the
  parent clears it when the worker exits; `/readyz` of any worker is `200` only when every byte is
  set (and the worker itself is ready), so a probe sees the machine, not one process.
- **Drain**: `SIGTERM` to the parent is passed to every worker, each drains as
  `frontends.serve.drain` says, and the parent exits 0 once all have exited (a worker still there
  `[serve] drain_seconds` + 30 s later is killed). A second `SIGTERM`, and `SIGINT`, are passed on.
- **Restart**: a worker that exits while the parent is not draining is started again on its
  socket, after a pause that doubles (up to 30 s) while it keeps dying within seconds. The first
  worker starts alone (it creates the state dir's store, key and token); if it cannot start, the
  parent exits with its status, so a configuration error is said once.

A worker is the same command line with `WORKER_ENV` set to where its socket and the status file
are (descriptors it inherits). The worker's responses carry `Toolshell-Process: <pid>`.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import FrameType

from starlette.types import ASGIApp, Message, Receive, Scope, Send

WORKER_ENV = "_TOOLSHELL_SERVE_WORKER"
"""Set by the parent for a worker: `<socket fd>,<status fd>,<index>,<count>`."""
TOKIO_ENV = "TOKIO_WORKER_THREADS"
"""bashkit's runtime threads a process (tokio's own setting). Unless it is set, each of N workers
gets the cores over N: N processes with a thread per core each would oversubscribe the machine N
times over, and every hop between the event loop and the runtime wakes threads to steal work."""
BACKLOG = 2048
RESTART_MAX_SECONDS = 30.0
QUICK_DEATH_SECONDS = 5.0
"""A worker that exits sooner than this after starting is restarted after a growing pause."""
KILL_AFTER_SECONDS = 30.0
"""How long past `[serve] drain_seconds` the parent waits for draining workers before killing them."""
_PR_SET_PDEATHSIG = 1


def cpu_count() -> int:
    """The cores this process may run on (its affinity, so a container's CPU set counts)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def listening_sockets(host: str, port: int, count: int) -> list[socket.socket]:
    """`count` sockets listening on `host:port`, sharing it with `SO_REUSEPORT`.

    Raises:
        OSError: the address cannot be bound (in use, not this machine's).
    """
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _, address = infos[0]
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind(address)
            address = sock.getsockname()  # port 0: the others join the port the first one got
            sock.listen(BACKLOG)
            sock.set_inheritable(True)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


@dataclass
class WorkerSlot:
    """What a worker process was handed: its socket, its place, and the status of all workers."""

    socket: socket.socket
    index: int
    count: int
    status: mmap.mmap

    def started(self) -> None:
        """This worker serves now."""
        self.status[self.index] = 1

    def not_ready(self) -> str | None:
        """Why the machine is not ready because of another worker; None when every one serves."""
        down = [i + 1 for i in range(self.count) if self.status[i] != 1]
        if not down:
            return None
        return f"worker {down[0]} of {self.count} is not serving (it is starting or restarting)"

    def tagged(self, app: ASGIApp) -> ASGIApp:
        """`app`, its responses saying which process answered (`Toolshell-Process`)."""
        return _Tagged(app, str(os.getpid()).encode())


def worker_slot(environ: dict[str, str] | None = None) -> WorkerSlot | None:
    """This process's slot when a `--processes` parent started it, else None.

    Raises:
        ValueError: `WORKER_ENV` is set but does not name a listening socket and a status file.
    """
    value = (os.environ if environ is None else environ).get(WORKER_ENV)
    if not value:
        return None
    try:
        sock_fd, status_fd, index, count = (int(part) for part in value.split(","))
        sock = socket.socket(fileno=sock_fd)
        if not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
            raise ValueError("not a listening socket")
        status = mmap.mmap(status_fd, count)
    except (ValueError, OSError) as err:
        raise ValueError(f"{WORKER_ENV} is for `serve --processes` to set; unset it ({err})") from None
    _die_with_parent()
    return WorkerSlot(sock, index, count, status)


def _die_with_parent() -> None:
    """Ask Linux to send this worker SIGTERM (a drain) when its parent dies, however it dies."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: a worker outlives a killed parent
        return
    if os.getppid() == 1:  # the parent died before prctl took
        os.kill(os.getpid(), signal.SIGTERM)


class _Tagged:
    def __init__(self, app: ASGIApp, pid: bytes) -> None:
        self.app = app
        self.pid = pid

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def tagging(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), (b"toolshell-process", self.pid)]
            await send(message)

        await self.app(scope, receive, tagging)


@dataclass
class _Worker:
    index: int
    sock: socket.socket
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    pause: float = 0.0
    due: float = 0.0
    """When a worker waiting to be restarted starts (monotonic)."""


class Supervisor:
    """The parent of `--processes N`: starts, restarts and drains the workers.

    Args:
        sockets: one listening socket per worker (`listening_sockets`).
        argv: the command line a worker runs (this process's own).
        drain_seconds: `[serve] drain_seconds`, to bound the wait for draining workers.
        say: where one-line notices go.
    """

    def __init__(
        self,
        sockets: Sequence[socket.socket],
        argv: Sequence[str],
        drain_seconds: float,
        say: Callable[[str], None],
    ) -> None:
        self.argv = list(argv)
        self.drain_seconds = drain_seconds
        self.say = say
        self.workers = [_Worker(i, s) for i, s in enumerate(sockets)]
        self.status_fd = os.memfd_create("toolshell-workers", 0)  # inheritable: memfd without MFD_CLOEXEC
        os.ftruncate(self.status_fd, len(self.workers))
        self.status = mmap.mmap(self.status_fd, len(self.workers))
        self.draining = 0.0
        self.terms = 0
        self._wake_r, self._wake_w = os.pipe()

    def run(self) -> int:
        """Serve until drained; the exit status (0 after a drain; the first worker's when it cannot start)."""
        for fd in (self._wake_r, self._wake_w):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(self._wake_w)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
            signal.signal(sig, self._on_signal)
        first = self.workers[0]
        self._start(first)
        while self.status[0] != 1:
            self._wait(0.1)
            if self.terms:
                return self._drained()
            if first.proc is not None and first.proc.poll() is not None:
                return first.proc.returncode or 1
        for worker in self.workers[1:]:
            self._start(worker)
        self.say(f"toolshell: {len(self.workers)} worker processes serve this port")
        while not self.terms:
            self._wait(1.0)
            self._reap()
        return self._drained()

    def _on_signal(self, sig: int, frame: FrameType | None) -> None:
        if sig == signal.SIGCHLD:
            return
        self.terms += 1
        for worker in self.workers:
            if worker.proc is not None and worker.proc.poll() is None:
                worker.proc.send_signal(sig if self.terms == 1 else signal.SIGTERM)

    def _wait(self, seconds: float) -> bool:
        """Wait for a signal (True) or `seconds`."""
        with selectors.DefaultSelector() as sel:
            sel.register(self._wake_r, selectors.EVENT_READ)
            woke = bool(sel.select(seconds))
        try:
            while os.read(self._wake_r, 512):
                pass
        except BlockingIOError:
            pass
        return woke

    def _start(self, worker: _Worker) -> None:
        fds = (worker.sock.fileno(), self.status_fd)
        env = {**os.environ, WORKER_ENV: f"{fds[0]},{fds[1]},{worker.index},{len(self.workers)}"}
        env.setdefault(TOKIO_ENV, str(max(1, cpu_count() // len(self.workers))))
        worker.proc = subprocess.Popen(self.argv, env=env, pass_fds=fds)
        worker.started = time.monotonic()

    def _reap(self) -> None:
        """Restart the workers that exited (after their pause)."""
        now = time.monotonic()
        for worker in self.workers:
            if worker.proc is not None and worker.proc.poll() is not None:
                self.status[worker.index] = 0
                quick = now - worker.started < QUICK_DEATH_SECONDS
                worker.pause = min(max(2 * worker.pause, 0.5), RESTART_MAX_SECONDS) if quick else 0.0
                self.say(
                    f"toolshell: worker {worker.index + 1} (pid {worker.proc.pid}) exited with "
                    f"{worker.proc.returncode}; starting it again" + (f" in {worker.pause:g} s" if worker.pause else "")
                )
                worker.proc, worker.due = None, now + worker.pause
            if worker.proc is None and now >= worker.due:
                self._start(worker)

    def _drained(self) -> int:
        """Wait for every worker to finish its drain (bounded); 0."""
        deadline = time.monotonic() + self.drain_seconds + KILL_AFTER_SECONDS
        for worker in self.workers:
            if worker.proc is None:
                continue
            while worker.proc.poll() is None and time.monotonic() < deadline:
                self._wait(0.2)
            if worker.proc.poll() is None:
                self.say(f"toolshell: worker {worker.index + 1} did not finish its drain; killing it")
                worker.proc.kill()
                worker.proc.wait()
            self.status[worker.index] = 0
        for worker in self.workers:
            worker.sock.close()
        return 0


def supervise(host: str, port: int, count: int, drain_seconds: float) -> int:
    """Run `count` workers of this very command on `host:port`; the exit status.

    Raises:
        OSError: the port cannot be bound.
    """
    sockets = listening_sockets(host, port, count)
    argv = [sys.executable, *sys.orig_argv[1:]]  # the interpreter's own flags and `-c`/`-m` kept
    return Supervisor(sockets, argv, drain_seconds, lambda line: print(line, file=sys.stderr, flush=True)).run()
