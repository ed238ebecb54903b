"""`toolshell serve`: the MCP server that exposes `bash`."""

from __future__ import annotations

import click

from toolshell.frontends.cli.binding import PORT, listen_address
from toolshell.frontends.cli.options import config_opt, load_config, run_async, state_opt


@click.command()
@config_opt
@state_opt
@click.option("--http", "use_http", is_flag=True, help="Serve Streamable HTTP instead of stdio.")
@click.option("--host", "bind", default="127.0.0.1", show_default=True, help="Address to bind with --http.")
@click.option("--port", type=PORT, default=8765, show_default=True, help="Port with --http.")
@click.option(
    "--allow-remote",
    is_flag=True,
    help="Allow --host to be a non-loopback address. There is no authentication: put it behind a proxy that has.",
)
def serve(
    config_path: str | None, state_dir: str | None, use_http: bool, bind: str, port: int, allow_remote: bool
) -> None:
    """Run an MCP server that exposes `bash` (plus `keep_visible` tools)."""
    # lazy: a command imports what it needs, so `toolshell --help` starts fast
    from toolshell.frontends.mcp_server import serve as serve_mcp

    if use_http:
        bind = listen_address(bind, port, allow_remote=allow_remote, what="run scripts with your tools")
    run_async(
        lambda: serve_mcp(
            load_config(config_path), state_dir, http=use_http, host=bind, port=port, config_path=config_path
        )
    )
