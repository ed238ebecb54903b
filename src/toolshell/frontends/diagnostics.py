"""`toolshell servers`: each server's state, with a live progress display while servers load."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from toolshell.config import Config
from toolshell.frontends.listings import server_rows
from toolshell.policy.rating import Ratings
from toolshell.registry.entry import ToolEntry
from toolshell.safe_text import escape

if TYPE_CHECKING:
    from toolshell.host import Host


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
            text = await servers_text(host, as_json)
    finally:
        if status is not None:
            status.stop()
    click.echo(text)


async def servers_text(host: Host, as_json: bool) -> str:
    """What `toolshell servers` prints about an open host (also a daemon's)."""
    catalog = await host.catalog()  # lists the tools of every loaded server, so counts are known
    rows = server_rows(host.statuses(), host.redact)
    rated = await rated_tools(catalog.entries, host.policy.ratings)
    for row in rows:
        row["rated"] = rated.get(row["name"], [])
    return json.dumps(rows, indent=2) if as_json else render_servers(rows)


async def rated_tools(entries: list[ToolEntry], ratings: Ratings | None) -> dict[str, list[dict[str, Any]]]:
    """The tools each server left to the rater (they declare no hints, or the server is untrusted):
    `{tool, rating, why, annotate}`, so a server author knows which annotation to add."""
    out: dict[str, list[dict[str, Any]]] = {}
    for entry in entries:
        explained = await ratings.explain(entry) if ratings is not None and entry.server else None
        if explained is None or entry.server is None:
            continue
        rating, why = explained
        out.setdefault(entry.server, []).append(
            {"tool": entry.name, "rating": rating, "why": why, "annotate": _annotate(entry, rating)}
        )
    return out


def _annotate(entry: ToolEntry, rating: str) -> str:
    if not entry.trusted:
        return "the server is configured `trusted = false`: its annotations are not believed, so it is always rated"
    if rating == "read_only":
        return "declare readOnlyHint: true to say so yourself"
    return "declare readOnlyHint: true if it changes nothing, else destructiveHint and openWorldHint as they are"


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
        lines.extend(f"    rated {t['tool']}: {t['rating']} ({t['why']}); {t['annotate']}" for t in r.get("rated", []))
        if r["stderr_tail"] and r["state"] != "ready":
            lines.extend(f"    stderr| {line}" for line in r["stderr_tail"][-10:])
    return "\n".join(map(escape, lines))
