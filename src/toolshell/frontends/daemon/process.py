"""The daemon process: `python -m toolshell.frontends.daemon.process [--config PATH] [--state-dir DIR]
[--idle-seconds N] [--ready-fd FD]`, started in the background by `toolshell daemon start`
(`control.start`), and `run_daemon`, its body (also `daemon start --foreground`).

It takes the address's lock and socket, serves (`server.Daemon`) and says how starting went on the
ready fd: one JSON line, or one error line a person can act on.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import anyio

from toolshell import config as cfg
from toolshell.errors import ConfigError, ToolshellError
from toolshell.frontends.daemon import wire
from toolshell.frontends.daemon.address import address_for
from toolshell.frontends.daemon.folder import AlreadyRunning, DaemonError, hold_lock, prepare_folder
from toolshell.frontends.daemon.server import Daemon, Ready, one_line


def run_daemon(config_path: str | None, state_dir: str | None, idle_seconds: float | None, ready: Ready) -> None:
    """Serve here until idle or stopped: the daemon process's body (also `daemon start --foreground`).

    Raises:
        DaemonError, ConfigError: it cannot start; `ready` was not called.
    """
    os.umask(0o077)  # every file it makes (socket, lock, log) is this user's alone
    address = address_for(config_path, state_dir)
    if address is None:
        raise DaemonError("the config's [state] dir uses ${VAR}; give --state-dir to run a daemon for it")
    prepare_folder(address)
    lock = hold_lock(address)
    socket_path = Path(address.socket)
    socket_path.unlink(missing_ok=True)  # a stale one: no daemon holds the lock
    try:
        config_idle = idle_seconds
        if config_idle is None:
            config_idle = cfg.load(config_path).cli.idle_seconds
        daemon = Daemon(address, config_path, state_dir, config_idle)
        anyio.run(daemon.serve, ready)
    finally:
        socket_path.unlink(missing_ok=True)  # before the lock goes: a new daemon's socket is never removed
        os.close(lock)


def _main() -> None:
    parser = argparse.ArgumentParser(prog="toolshell-daemon")
    parser.add_argument("--config")
    parser.add_argument("--state-dir")
    parser.add_argument("--idle-seconds", type=float)
    parser.add_argument("--ready-fd", type=int)
    args = parser.parse_args()
    # lazy: the daemon logs the way every command does
    from toolshell.frontends.logs import setup_logging

    setup_logging(bool(os.environ.get("TOOLSHELL_DEBUG")))
    said: list[bool] = []

    def ready(message: dict[str, Any]) -> None:
        said.append(True)
        _say(args.ready_fd, message)

    try:
        run_daemon(args.config, args.state_dir, args.idle_seconds, ready)
    except AlreadyRunning as e:
        _say(args.ready_fd, {"error": str(e), "already": True})
        sys.exit(1)
    except Exception as e:  # the daemon's last line of defence: one line, in its log and to `daemon start`
        known = _known(e)
        if known is not None:
            message = known.message if isinstance(known, ToolshellError) else _config_text(known)
        elif os.environ.get("TOOLSHELL_DEBUG"):
            raise
        else:
            message = f"unexpected error: {type(e).__name__}: {one_line(e)}; TOOLSHELL_DEBUG=1 logs the traceback"
    else:
        return
    if not said:
        _say(args.ready_fd, {"error": message})
    print(f"toolshell daemon: {message}", file=sys.stderr)
    sys.exit(1)


def _known(e: BaseException) -> Exception | None:
    """The error a person can act on, also from inside a task group's `ExceptionGroup`."""
    if isinstance(e, DaemonError | ConfigError | ToolshellError):
        return e
    if isinstance(e, BaseExceptionGroup):
        for inner in e.exceptions:
            if (found := _known(inner)) is not None:
                return found
    return None


def _say(fd: int | None, message: dict[str, Any]) -> None:
    """Tell `daemon start` how starting went (it may have stopped waiting: then nobody listens)."""
    if fd is None:
        return
    try:
        os.write(fd, wire.encode(message))
        os.close(fd)
    except OSError:
        pass


def _config_text(e: Exception) -> str:
    if isinstance(e, ConfigError):
        problems = "; ".join(f"{place}: {msg}" if place else msg for place, msg in e.problems)
        return f"config error in {e.source or 'configuration'}: {problems}"
    return str(e)


if __name__ == "__main__":
    _main()

__all__ = ["run_daemon"]
