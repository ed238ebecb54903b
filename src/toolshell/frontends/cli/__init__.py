"""The `toolshell` command line: a thin click layer over the Python API, one module per command group.

Heavy modules (`mcp`, `bashkit`) are imported inside the commands that need them, so `toolshell
--help` and `toolshell config validate` start fast.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from toolshell.frontends.cli import approvals, auth, config, daemon, run, serve, servers, setup, stats, triggers, web
from toolshell.frontends.cli.options import group_paths
from toolshell.frontends.logs import debugging, setup_logging
from toolshell.safe_text import escape
from toolshell.version import __version__


class _Toolshell(click.Group):
    """The root group: whatever a command did not turn into a message becomes one line, not a
    traceback (`--debug` keeps the traceback)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as e:  # the last line of defence; a known error never gets here
            if debugging():
                raise
            click.echo(f"toolshell: unexpected error: {_summary(e)}; rerun with --debug for the traceback", err=True)
            sys.exit(1)


def _summary(e: BaseException) -> str:
    if isinstance(e, BaseExceptionGroup):
        return "; ".join(_summary(leaf) for leaf in e.exceptions)
    return escape(f"{type(e).__name__}: {' '.join(str(e).split())}")


@click.group(cls=_Toolshell, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="toolshell")  # version.py: the one place it is written
@click.option(
    "--debug",
    is_flag=True,
    envvar="TOOLSHELL_DEBUG",
    help="Log everything, with tracebacks (also TOOLSHELL_DEBUG=1).",
)
@group_paths
def main(debug: bool) -> None:
    """toolshell: every MCP tool behind one sandboxed shell command, `tools`."""
    setup_logging(debug)


for _command in (
    run.run,
    run.plan,
    run.shell,
    run.scripts,
    servers.servers,
    servers.timeline,
    stats.stats,
    serve.serve,
    setup.setup,
    config.config,
    approvals.approvals,
    triggers.triggers,
    auth.auth,
    web.web,
    daemon.daemon,
):
    main.add_command(_command)

__all__ = ["main"]
