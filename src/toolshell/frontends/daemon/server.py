"""The daemon: a host kept open (servers connected, catalog warm) behind a Unix socket.

`toolshell daemon start` runs it in the background (`process.py` is that process). It serves the commands of
one address (`address.Address`: config, working directory, state) to processes of its own user
only: the socket is 0600 in a 0700 folder, and every connection's peer uid is checked as well.
Each request is one connection; requests run concurrently, each in its own session.

It serves what a cold command run here would use, checked on every request: when the config file
changes, or a checkout's `toolshell.toml` becomes trusted or stops being trusted, the config is
loaded again, and requests already running finish on the host they began on. A config that no
longer loads is never served: the client runs the command cold, which says what is wrong.
The daemon exits after `idle_seconds` without a request, on `toolshell daemon stop`, on SIGTERM,
and when a client of another toolshell version asks (it is stale).
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel
from anyio.abc import SocketAttribute
from anyio.streams.buffered import BufferedByteReceiveStream

from toolshell import config as cfg
from toolshell.calls.approval import name_process_options
from toolshell.errors import ToolshellError, error_line
from toolshell.frontends.daemon import wire
from toolshell.frontends.daemon.address import Address
from toolshell.frontends.daemon.connection import (
    discard,
    gone,
    read_line,
    reader,
    role,
    run_script,
    send,
    text,
)
from toolshell.frontends.daemon.environment import ALWAYS_ENV, ENV_PREFIXES, environment, named_env, newer
from toolshell.frontends.daemon.folder import DaemonError
from toolshell.frontends.daemon.outcome import plan_output
from toolshell.host import Host
from toolshell.version import __version__

logger = logging.getLogger(__name__)
Ready = Callable[[dict[str, Any]], None]
STOP_GRACE_SECONDS = 10.0
"""On stop, how long running commands have to finish before they are cancelled."""


@dataclass
class _Generation:
    """One opened host, for one version of the config file."""

    host: Host
    path: str | None
    """The config file it was opened from (None: the embedded default)."""
    fingerprint: str | None
    note: str | None
    """What a cold command here says first (a skipped, untrusted `./toolshell.toml`)."""
    active: int = 0
    retired: bool = False
    drained: anyio.Event = field(default_factory=anyio.Event)

    def release(self) -> None:
        self.active -= 1
        if self.retired and self.active == 0:
            self.drained.set()


class Daemon:
    """Serve one address until idle, stopped, or stale.

    Args:
        address: what it serves (computed the way the thin client computes it).
        config_path: `--config` as given (None: found the way a command finds it).
        state_dir: `--state-dir` as given.
        idle_seconds: exit after this long without a request.
    """

    def __init__(self, address: Address, config_path: str | None, state_dir: str | None, idle_seconds: float) -> None:
        self.address = address
        self.config_path = config_path
        self.state_dir = state_dir
        self.idle_seconds = idle_seconds
        self.started = time.time()
        self.requests = 0
        self.reloads = 0
        self._active = 0
        self._last_request = time.monotonic()
        self._generation: _Generation | None = None
        self._reload_lock = anyio.Lock()
        self._tg: anyio.abc.TaskGroup | None = None
        self._stopping = anyio.Event()
        self._stop_when_answered: str | None = None
        self._unusable: tuple[str | None, str | None] | None = None
        """The config file and bytes a reload failed on (tried again once the file changes)."""
        self._env: dict[str, str | None] = {}
        """The variables its answers depend on, as the daemon has them (`_env_names`)."""
        self._quiet = anyio.Event()
        """Set while nothing is being served (replaced when something starts)."""
        self._quiet.set()

    # --- the config ----------------------------------------------------------------------------

    def _in_use(self) -> tuple[cfg.Source, str | None]:
        """The config a cold command would use here now, read once, and its file (resolved; None:
        the embedded default)."""
        source = cfg.config_source(self.config_path)
        return source, (None if source.path is None else str(source.path.resolve()))

    def _env_names(self, config: cfg.Config, source: cfg.Source) -> set[str]:
        """The variables the answers depend on: those the config file names (`${VAR}`, `[shell]
        env`, `*_env`), and those every command reads (`TOOLSHELL_*`, `OTEL_*`, what a stdio
        server inherits)."""
        text = (source.data or b"").decode("utf-8", errors="replace")
        return {*cfg.referenced_vars(text), *config.shell.env, *named_env(config.model_dump()), *ALWAYS_ENV}

    async def _current(self) -> _Generation | str:
        """The host to serve a request on: the open one while the config a cold command would use
        is the same file with the same bytes, else one opened afresh from the bytes just read (so
        an edit saved while it opens is a change the next request sees); or why the request must
        run cold (the new config does not load)."""
        async with self._reload_lock:
            now = self._generation
            assert now is not None  # set before the socket is bound
            source, path = self._in_use()
            now.note = source.note
            if path == now.path and source.digest == now.fingerprint:
                now.active += 1  # counted under the lock: a reload cannot retire it before it is used
                return now
            if (path, source.digest) == self._unusable:  # tried already: runs cold at once
                return "the config changed and cannot be used"
            try:
                config = cfg.load_source(source)
                opened = await self._open(config, source, path)
            except Exception as e:  # it does not load or open: a cold command says why, this says nothing
                logger.warning("not serving: the config changed and cannot be used (%s)", one_line(e))
                self._unusable = (path, source.digest)
                return "the config changed and cannot be used"
            self._env = environment(os.environ, self._env_names(config, source))
            now.retired = True
            if now.active == 0:
                now.drained.set()
            self.reloads += 1
            logger.warning("the config changed: reloaded %s", path or "the embedded default")
            opened.active += 1
            return opened

    async def _open(self, config: cfg.Config, source: cfg.Source, path: str | None) -> _Generation:
        """Open a host in a task of its own (it must close in the task that opened it). Its
        fingerprint is of the bytes `config` was parsed from, never of the file as it is later."""
        assert self._tg is not None
        opened: list[_Generation] = []
        ready = anyio.Event()
        failed: list[BaseException] = []

        async def keep() -> None:
            try:
                async with Host.open(config, state_dir=self.state_dir) as host:
                    # The grant hint names options that reach this host's state from anywhere.
                    name_process_options(path, _absolute(host.state_dir))
                    await host.catalog()  # warm: each server's tools listed once, their counts known
                    generation = _Generation(host, path, source.digest, source.note)
                    opened.append(generation)
                    ready.set()
                    await generation.drained.wait()
            except Exception as e:  # reported to whoever waits for this host
                failed.append(e)
                ready.set()

        self._tg.start_soon(keep)
        await ready.wait()
        if failed:
            raise failed[0]
        self._generation = opened[0]
        return opened[0]

    # --- serving -------------------------------------------------------------------------------

    async def serve(self, ready: Ready) -> None:
        """Open the host, listen, say `ready`, and serve until idle, stopped or stale."""
        source, path = self._in_use()
        config = cfg.load_source(source)
        self._env = environment(os.environ, self._env_names(config, source))
        async with anyio.create_task_group() as tg:
            self._tg = tg
            await self._open(config, source, path)
            socket_path = self.address.socket
            listener = await anyio.create_unix_listener(socket_path)
            os.chmod(socket_path, 0o600)  # already so by the umask; said again for clarity
            tg.start_soon(self._watch_idle)
            tg.start_soon(self._watch_signals)
            async with anyio.create_task_group() as handlers:
                accepting = anyio.CancelScope()

                async def accept() -> None:
                    with accepting:
                        await listener.serve(self._handle, task_group=handlers)

                handlers.start_soon(accept)
                ready({"ready": True, "pid": os.getpid(), "socket": str(socket_path)})
                logger.warning("serving %s in %s", path or "the embedded default", self.address.cwd)
                await self._stopping.wait()
                accepting.cancel()
                await listener.aclose()  # new connections are refused (their commands run cold)
                with anyio.move_on_after(STOP_GRACE_SECONDS):  # what runs may finish; then it is cancelled
                    await self._quiet.wait()
                handlers.cancel_scope.cancel()
            if self._generation is not None:
                self._generation.retired = True
                if self._generation.active == 0:
                    self._generation.drained.set()
            tg.cancel_scope.cancel()

    def stop(self, why: str) -> None:
        logger.warning("stopping: %s", why)
        self._stopping.set()

    async def _watch_idle(self) -> None:
        while True:
            quiet = time.monotonic() - self._last_request
            if self._active == 0 and quiet >= self.idle_seconds:
                self.stop(f"no request for {self.idle_seconds:g} s")
                return
            await anyio.sleep(max(0.05, self.idle_seconds - quiet) if self._active == 0 else self.idle_seconds)

    async def _watch_signals(self) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for received in signals:
                self.stop(signal.Signals(received).name)
                return

    async def _handle(self, stream: anyio.abc.SocketStream) -> None:
        try:
            async with stream:
                raw = stream.extra(SocketAttribute.raw_socket)
                uid = wire.peer_uid(raw)
                if uid != os.geteuid():
                    logger.warning("refused a connection from uid %d (it serves uid %d only)", uid, os.geteuid())
                    await send(stream, {"refused": "this daemon serves its own user only"})
                    await discard(stream)
                    return
                lines = reader(stream)
                request = await read_line(stream, lines)
                if request is not None:
                    await self._answer(stream, lines, request)
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the client went away (Ctrl-C): its run was cancelled with it
        except Exception as e:  # one connection's failure never stops the daemon
            logger.warning("a connection failed: %s", one_line(e))
        finally:
            if self._stop_when_answered is not None:  # after the answer went out and the stream closed
                self.stop(self._stop_when_answered)

    async def _answer(
        self, stream: anyio.abc.SocketStream, lines: BufferedByteReceiveStream, request: dict[str, Any]
    ) -> None:
        op = request.get("op")
        if request.get("version") != __version__:
            await send(stream, {"fallback": f"the daemon runs toolshell {__version__}"})
            if newer(request.get("version"), __version__):  # an upgrade: this daemon is stale
                self._stop_when_answered = f"a client of toolshell {request.get('version')} asked: this daemon is stale"
            return
        if request.get("v") != wire.PROTOCOL:
            await send(stream, {"fallback": "another protocol version"})
            return
        if request.get("address") != self.address.to_json():
            await send(stream, {"fallback": "this daemon serves another config, directory or state"})
            return
        if op == "status":
            await send(stream, {"exit": 0, "status": self.status()})
            return
        if op == "stop":
            await send(stream, {"exit": 0, "stdout": f"stopped the daemon (pid {os.getpid()})\n"})
            self._stop_when_answered = "asked to"
            return
        if self._stopping.is_set():  # it is stopping: this one runs cold, nothing of it here
            await send(stream, {"fallback": "the daemon is stopping"})
            return
        # What of the caller's environment counts, by name: it sends that, and no other variable.
        await send(stream, {"compare": {"names": sorted(self._env), "prefixes": list(ENV_PREFIXES)}})
        detail = await read_line(stream, lines)
        if detail is None:
            return
        request = {**detail, "op": op}
        env = request.get("env")
        if not isinstance(env, dict) or environment(env, set(self._env)) != self._env:
            await send(stream, {"fallback": "the environment differs from the daemon's"})
            return
        generation = await self._current()
        if isinstance(generation, str):
            await send(stream, {"fallback": generation})
            return
        if gone(stream):  # it gave up waiting (and runs the command cold): nothing runs here
            generation.release()
            return
        noted = f"{generation.note}\n" if generation.note else ""
        await send(stream, {"out": "", "err": noted})  # accepted: from here on it runs
        self.requests += 1
        self._active += 1
        if self._quiet.is_set():
            self._quiet = anyio.Event()
        try:
            await self._serve_op(stream, generation.host, op, request)
        finally:
            generation.release()
            self._active -= 1
            self._last_request = time.monotonic()  # only what it serves keeps it awake (not `status`)
            if self._active == 0:
                self._quiet.set()

    async def _serve_op(self, stream: anyio.abc.SocketStream, host: Host, op: Any, request: dict[str, Any]) -> None:
        try:
            if op == "run":
                outcome = await run_script(stream, host, request, self.address.cwd)
            elif op == "plan":
                planned = await host.plan(text(request, "script"), role=role(request))
                outcome = {"exit": 0, "stdout": plan_output(planned)}
            elif op == "servers":
                # lazy: only `servers` lists what each server rated
                from toolshell.frontends.diagnostics import servers_text

                outcome = {"exit": 0, "stdout": await servers_text(host, bool(request.get("json"))) + "\n"}
            else:
                outcome = {"exit": 2, "stderr": f"toolshell: the daemon does not know {op!r}\n"}
        except ToolshellError as e:  # as the cold command's `guard` says it
            outcome = {"exit": 2 if getattr(e, "usage_error", False) else 1, "stderr": error_line(e)}
        except Exception as e:  # the daemon's boundary: one line, as the CLI's own last line of defence
            logger.debug("a %s request failed", op, exc_info=True)
            said = f"toolshell: unexpected error: {one_line(e)}; rerun with --no-daemon --debug\n"
            outcome = {"exit": 1, "stderr": said}
        await send(stream, outcome)

    def status(self) -> dict[str, Any]:
        """What `toolshell daemon status` shows."""
        generation = self._generation
        statuses = generation.host.statuses() if generation is not None else []
        servers = [{"name": s.name, "state": str(s.state), "tools": s.tool_count} for s in statuses]
        return {
            "running": True,
            "pid": os.getpid(),
            "version": __version__,
            **self.address.shown(),
            "serving": None if generation is None else generation.path,
            **({} if generation is None else {"state_dir": _absolute(generation.host.state_dir)}),
            "socket": str(self.address.socket),
            "started": self.started,
            "uptime_seconds": round(time.time() - self.started, 1),
            "requests": self.requests,
            "reloads": self.reloads,
            "idle_seconds": self.idle_seconds,
            "servers": servers,
        }


def _absolute(path: Path | str) -> str:
    """A path as an absolute one (a config's relative `[state] dir` is relative to the daemon's
    working directory, which is its address's)."""
    return os.path.abspath(path)


def one_line(e: BaseException) -> str:
    """An error as one line, for a log or a client."""
    return " ".join(str(e).split()) or type(e).__name__


__all__ = ["Daemon", "DaemonError", "Ready"]
