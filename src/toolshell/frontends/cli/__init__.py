"""The `toolshell` command line: a thin click layer over the Python API, one module per command group.

Heavy modules (`mcp`, `bashkit`) are imported inside the commands that need them, so `toolshell
--help` and `toolshell config validate` start fast.
"""

from __future__ import annotations

import click

from toolshell.frontends.cli import approvals, auth, config, run, serve, servers, triggers


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="toolshell")
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
):
    main.add_command(_command)

__all__ = ["main"]
