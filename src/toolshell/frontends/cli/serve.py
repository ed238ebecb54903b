"""`toolshell serve`: the MCP server that exposes `bash`."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click
from pydantic import ValidationError

from toolshell.config import Config
from toolshell.config.serve import ServeConfig
from toolshell.frontends.cli.binding import PORT, listen_address
from toolshell.frontends.cli.options import config_opt, guard, load_config, run_async, state_opt

if TYPE_CHECKING:
    from toolshell.frontends.serve.processes import WorkerSlot


def with_allowed_hosts(config: Config, names: tuple[str, ...]) -> Config:
    """`config` with the `--allowed-host` names added to `[serve] allowed_hosts` (checked as the file's are)."""
    if not names:
        return config
    try:
        serve_config = ServeConfig.model_validate(
            {**config.serve.model_dump(exclude_unset=True), "allowed_hosts": [*config.serve.allowed_hosts, *names]}
        )
    except ValidationError as err:
        message = err.errors()[0]["msg"].removeprefix("Value error, ")
        raise click.BadParameter(message, param_hint="--allowed-host") from None
    return config.model_copy(update={"serve": serve_config})


class Processes(click.ParamType[Any, Any]):
    """`--processes`: a count of worker processes, or `auto` (one per core this process may use)."""

    name = "N|auto"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        text = str(value).strip().lower()
        if text == "auto":
            from toolshell.frontends.serve.processes import cpu_count  # lazy: only when asked

            return cpu_count()
        if text.isdigit() and 1 <= int(text) <= MAX_PROCESSES:
            return int(text)
        wanted = f"give 1 to {MAX_PROCESSES}, or auto (one per core)"
        self.fail(f"{value!r} is not a count of processes: {wanted}", param, ctx)


MAX_PROCESSES = 256


@click.command()
@config_opt
@state_opt
@click.option("--http", "use_http", is_flag=True, help="Serve Streamable HTTP instead of stdio.")
@click.option("--host", "bind", default="127.0.0.1", show_default=True, help="Address to bind with --http.")
@click.option("--port", type=PORT, default=8765, show_default=True, help="Port with --http.")
@click.option(
    "--allow-remote",
    is_flag=True,
    help="Allow --host to be a non-loopback address. Callers still need the token (or [serve.oauth]); "
    "put it behind TLS.",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="A public host name (or name:port) clients reach this server by, e.g. behind a proxy; "
    "repeatable, added to [serve] allowed_hosts. Other Host headers get 421 (DNS-rebinding protection).",
)
@click.option(
    "--no-auth",
    is_flag=True,
    help="Serve --http without authentication, on a loopback address only: any local user can call it.",
)
@click.option(
    "--processes",
    type=Processes(),
    default=1,
    show_default=True,
    help="With --http: run N worker processes behind the one port (SO_REUSEPORT), `auto` for one per "
    "core, so one serve uses the machine's cores. One /readyz (ready when every worker is), one drain "
    "(SIGTERM drains them all), a worker that dies is restarted. Meant for 2026-07-28 clients: a legacy "
    "(2025-11-25) session lives in the one process that opened it (docs/scale-out.md).",
)
def serve(
    config_path: str | None,
    state_dir: str | None,
    use_http: bool,
    bind: str,
    port: int,
    allow_remote: bool,
    allowed_hosts: tuple[str, ...],
    no_auth: bool,
    processes: int,
) -> None:
    """Run an MCP server that exposes `bash` (plus `keep_visible` tools).

    With --http every request needs 'Authorization: Bearer <token>': the token is
    $TOOLSHELL_SERVE_TOKEN, else the one in <state-dir>/serve-token (made on first start, 0600),
    or an access token of the [serve.oauth] issuer. GET /healthz and /readyz answer
    probes without a token; SIGTERM drains ([serve] drain_seconds) before exiting.
    With --processes N (or auto) N worker processes share the port, the state store and the drain.
    """
    # lazy: a command imports what it needs, so `toolshell --help` starts fast
    from toolshell.frontends.serve.server import is_loopback
    from toolshell.frontends.serve.server import serve as serve_mcp

    if no_auth and not use_http:
        raise click.UsageError("--no-auth applies to --http only (stdio has no network to guard)")
    if processes > 1 and not use_http:
        raise click.UsageError("--processes applies to --http only (stdio has one client)")
    worker = None
    if use_http:
        if no_auth and not is_loopback(bind.strip("[]")):
            raise click.UsageError(f"--no-auth serves loopback addresses only; drop it to serve {bind} with the token")
        worker = guard(worker_of_parent)  # its parent bound the port: no trial bind
        trial = None if worker is not None else port
        bind = listen_address(bind, trial, allow_remote=allow_remote, what="run scripts with your tools")
    if allowed_hosts and not use_http:
        raise click.UsageError("--allowed-host applies to --http only")
    config = with_allowed_hosts(guard(lambda: load_config(config_path)), allowed_hosts)  # a config error: one message
    if processes > 1 and worker is None:
        refused = processes_refused(config, state_dir)
        if refused:
            raise click.UsageError(refused)
        sys.exit(run_processes(bind, port, processes, config.serve.drain_seconds))
    run_async(
        lambda: serve_mcp(
            config,
            state_dir,
            http=use_http,
            host=bind,
            port=port,
            config_path=config_path,
            no_auth=no_auth,
            worker=worker,
        ),
        fast_loop=True,
    )


def worker_of_parent() -> WorkerSlot | None:
    """The slot a `--processes` parent gave this process (`frontends.serve.processes`), else None."""
    from toolshell.frontends.serve.processes import worker_slot  # lazy: `toolshell --help` starts fast

    try:
        return worker_slot()
    except ValueError as err:
        raise click.UsageError(str(err)) from None


def processes_refused(config: Config, state_dir: str | None) -> str | None:
    """Why `--processes` cannot serve this config: what the workers must share, they cannot."""
    from toolshell.config import state_location  # lazy, as above

    where = state_location(config, state_dir)
    if where.strip() in ("", ":memory:") or where.startswith("file::memory:"):
        return "--processes needs a state store the processes share: a SQLite file or PostgreSQL, not :memory:"
    if config.telemetry.prometheus_port is not None:
        return (
            "--processes: [telemetry] prometheus_port is one process's port; with several processes "
            "export metrics over OTLP ([telemetry] endpoint) instead"
        )
    return None


def run_processes(bind: str, port: int, count: int, drain_seconds: float) -> int:
    from toolshell.frontends.serve.processes import supervise  # lazy, as above

    try:
        return supervise(bind.strip("[]"), port, count, drain_seconds)
    except OSError as err:
        raise click.ClickException(f"cannot listen on {bind}:{port} ({err.strerror or err})") from None
