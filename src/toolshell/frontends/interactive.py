"""`toolshell shell`: one session at a prompt, for people. Approvals are asked on the spot."""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import click

from toolshell.config import Config
from toolshell.frontends.cli import say_waiting

_BANNER = """toolshell — a sandboxed shell with every tool behind `tools`.
Try: tools --help · tools search <words> · tools plan <<'EOF' … EOF
End a line with \\ to continue it; exit with Ctrl-D or `exit`."""


async def _read(prompt: str) -> str | None:
    try:
        return await anyio.to_thread.run_sync(lambda: input(prompt))
    except EOFError:
        return None


async def read_script() -> str | None:
    """A script from the prompt: lines ending in `\\` or inside an open heredoc continue it."""
    lines: list[str] = []
    heredoc: str | None = None
    while True:
        line = await _read("... " if lines else "toolshell$ ")
        if line is None:
            return "\n".join(lines) if lines else None
        lines.append(line)
        if heredoc is not None:
            if line.strip() == heredoc:
                heredoc = None
            else:
                continue
        elif "<<" in line:
            word = line.split("<<", 1)[1].strip().lstrip("-").strip("'\"").split()
            if word:
                heredoc = word[0]
                continue
        if line.endswith("\\"):
            continue
        return "\n".join(lines)


class TerminalAnswerer:
    """Answers a server's elicitation at the terminal (accept with JSON content, or decline)."""

    async def elicit(self, server: str, params: Any) -> Any:
        import mcp_types as types

        click.echo(f"\n[{server}] asks: {getattr(params, 'message', '')}", err=True)
        answer = await _read("answer as JSON (empty = decline): ")
        if not answer:
            return types.ElicitResult(action="decline")
        try:
            return types.ElicitResult(action="accept", content=json.loads(answer))
        except ValueError:
            return types.ElicitResult(action="accept", content={"value": answer})


async def ask_approval(entry: Any, arguments: dict[str, Any], risk: Any) -> str:
    click.echo(f"\n{entry.command} {json.dumps(arguments)} needs approval ({risk.why}): {risk.message}", err=True)
    answer = (await _read("allow? [y]es once / [a]lways / [N]o: ") or "").strip().lower()
    return {"y": "once", "yes": "once", "a": "always", "always": "always"}.get(answer, "deny")


async def interactive(config: Config, state_dir: str | None, role: str | None = None) -> None:
    from toolshell.host import Host

    try:
        import readline  # noqa: F401  (history and line editing for input())
    except ImportError:
        pass
    click.echo(_BANNER, err=True)
    # A person is at the prompt, so approvals are asked on the spot unless the config says otherwise.
    if "inline" not in config.approval.model_fields_set:
        config = config.model_copy(update={"approval": config.approval.model_copy(update={"inline": True})})
    async with Host.open(config, state_dir=state_dir, on_wait=say_waiting) as host:
        session = host.session(answerer=TerminalAnswerer(), source="cli", role=role)
        session.approver = ask_approval
        while (script := await read_script()) is not None:
            if script.strip() in ("exit", "quit"):
                break
            if not script.strip():
                continue
            result = await session.run(script)
            sys.stdout.write(result.stdout)
            sys.stderr.write(result.stderr)
            if result.tools and result.tools.get("stopped"):
                click.echo(json.dumps(result.tools, indent=2), err=True)
            for hint in result.hints:
                click.echo(f"hint: {hint}", err=True)
