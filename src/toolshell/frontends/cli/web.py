"""`toolshell web`: the local page for approvals, grants, the timeline, servers and saved scripts."""

from __future__ import annotations

import click

from toolshell.frontends.cli.options import config_opt, guard, load_config, run_async, state_opt


@click.command()
@config_opt
@state_opt
@click.option("--host", "host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8766, show_default=True, type=click.IntRange(0, 65535), help="Port (0: any free one).")
@click.option(
    "--allow-remote",
    is_flag=True,
    help="Allow a non-loopback --host. Anyone with the URL can then answer approvals and run saved scripts.",
)
def web(config_path: str | None, state_dir: str | None, host: str, port: int, allow_remote: bool) -> None:
    """Serve the web page; its URL, with a one-time token, is printed on stdout."""
    # Lazy: starlette and uvicorn cost ~0.3 s to import, and only this command needs them.
    from toolshell.errors import ToolshellError
    from toolshell.frontends.serve.server import is_loopback
    from toolshell.frontends.web.serve import bind, serve_web

    if not is_loopback(host) and not allow_remote:
        raise click.UsageError(
            f"--host {host} would let other machines answer your approvals and run your saved scripts; keep the "
            "default 127.0.0.1, or pass --allow-remote (the URL's token is then the only protection)"
        )
    loaded = guard(lambda: load_config(config_path))
    try:
        sock = bind(host, port)
    except ToolshellError as e:
        raise click.ClickException(e.message) from None
    run_async(lambda: serve_web(loaded, state_dir, host, sock))
