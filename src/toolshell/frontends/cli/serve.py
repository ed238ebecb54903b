"""`toolshell serve`: the MCP server that exposes `bash`."""

from __future__ import annotations

import click
from pydantic import ValidationError

from toolshell.config import Config
from toolshell.config.serve import ServeConfig
from toolshell.frontends.cli.binding import PORT, listen_address
from toolshell.frontends.cli.options import config_opt, guard, load_config, run_async, state_opt


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
def serve(
    config_path: str | None,
    state_dir: str | None,
    use_http: bool,
    bind: str,
    port: int,
    allow_remote: bool,
    allowed_hosts: tuple[str, ...],
    no_auth: bool,
) -> None:
    """Run an MCP server that exposes `bash` (plus `keep_visible` tools).

    With --http every request needs 'Authorization: Bearer <token>': the token is
    $TOOLSHELL_SERVE_TOKEN, else the one in <state-dir>/serve-token (made on first start, 0600),
    or an access token of the [serve.oauth] issuer. GET /healthz and /readyz answer
    probes without a token; SIGTERM drains ([serve] drain_seconds) before exiting.
    """
    # lazy: a command imports what it needs, so `toolshell --help` starts fast
    from toolshell.frontends.serve.server import is_loopback
    from toolshell.frontends.serve.server import serve as serve_mcp

    if no_auth and not use_http:
        raise click.UsageError("--no-auth applies to --http only (stdio has no network to guard)")
    if use_http:
        if no_auth and not is_loopback(bind.strip("[]")):
            raise click.UsageError(f"--no-auth serves loopback addresses only; drop it to serve {bind} with the token")
        bind = listen_address(bind, port, allow_remote=allow_remote, what="run scripts with your tools")
    if allowed_hosts and not use_http:
        raise click.UsageError("--allowed-host applies to --http only")
    config = with_allowed_hosts(guard(lambda: load_config(config_path)), allowed_hosts)  # a config error: one message
    run_async(
        lambda: serve_mcp(
            config,
            state_dir,
            http=use_http,
            host=bind,
            port=port,
            config_path=config_path,
            no_auth=no_auth,
        )
    )
