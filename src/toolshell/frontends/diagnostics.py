"""`toolshell servers`: each server's state, with a live progress display while servers load."""

from __future__ import annotations

import json
from typing import Any

import click

from toolshell.config import Config
from toolshell.frontends.listings import server_rows
from toolshell.safe_text import escape


async def show_servers(config: Config, state_dir: str | None, as_json: bool) -> None:
    # lazy: only `toolshell servers` draws with rich
    from rich.console import Console
    from rich.status import Status

    # lazy: only `toolshell servers` draws with rich
    from toolshell.host import Host

    console = Console(stderr=True)
    status: Status | None = None if as_json or not console.is_terminal else console.status("loading servers…")

    def on_progress(server: str, state: Any) -> None:
        if status is not None:
            status.update(f"loading servers… {server}: {state}")

    if status is not None:
        status.start()
    try:
        # Diagnostics wait for every server to settle, however long its startup timeout.
        longest = max([s.startup_timeout_seconds for s in config.mcp.servers] + [config.startup_wait_seconds])
        config = config.model_copy(update={"startup_wait_seconds": longest + 1})
        async with Host.open(config, state_dir=state_dir, on_server_progress=on_progress) as host:
            await host.catalog()  # lists the tools of every loaded server, so counts are known
            rows = server_rows(host.statuses(), host.redact)
    finally:
        if status is not None:
            status.stop()
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    click.echo(render_servers(rows))


def render_servers(rows: list[dict[str, Any]]) -> str:
    """Plain text: one block per server, the stderr tail indented under a failing one."""
    lines = []
    for r in rows:
        tools = "-" if r["tool_count"] is None else str(r["tool_count"])
        version = r["protocol_version"] or "-"
        lines.append(f"{r['name']:<16} {r['type']:<8} {r['state']:<11} load={r['load']:<10} tools={tools:<4} {version}")
        if r.get("auth_reason"):
            lines.append(f"    needs login: {r['auth_reason']}")
        if r["last_error"]:
            lines.append(f"    last error: {r['last_error']}")
        lines.extend(f"    note: {note}" for note in r.get("notes", []))
        if r["stderr_tail"] and r["state"] != "ready":
            lines.extend(f"    stderr| {line}" for line in r["stderr_tail"][-10:])
    return "\n".join(map(escape, lines))
