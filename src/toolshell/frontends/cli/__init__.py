"""The `toolshell` command line: a thin click layer over the Python API, one module per command group.

Heavy modules (`mcp`, `bashkit`) are imported inside the commands that need them, so `toolshell
--help` and `toolshell config validate` start fast.
"""

from __future__ import annotations

import click

from toolshell.frontends.cli import approvals, auth, config, run, serve, servers, triggers, web
from toolshell.frontends.cli.options import group_paths


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="toolshell")
@group_paths
def main() -> None:
    """toolshell: every MCP tool behind one sandboxed shell command, `tools`."""


for _command in (
    run.run,
    run.plan,
    run.shell,
    run.scripts,
    servers.servers,
    servers.timeline,
    serve.serve,
    config.config,
    approvals.approvals,
    triggers.triggers,
    auth.auth,
    web.web,
):
    main.add_command(_command)

__all__ = ["main"]
