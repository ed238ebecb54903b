"""`toolshell shell`: one session at a prompt, for people. Approvals are asked on the spot."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import anyio
import click

from toolshell.config import Config
from toolshell.frontends.console import say_waiting
from toolshell.safe_text import escape, escape_lines

_BANNER = """toolshell — a sandboxed shell with every tool behind `tools`.
Try: tools --help · tools search <words> · tools plan <<'EOF' … EOF
An unfinished command (or a line ending in \\) continues on the next line; an empty line sends it.
Exit with Ctrl-D or `exit`."""


async def _read(prompt: str) -> str | None:
    def read() -> str:
        sys.stderr.write(prompt)  # prompts go to stderr, so piped stdout holds only results
        sys.stderr.flush()
        return input()

    try:
        return await anyio.to_thread.run_sync(read)
    except EOFError:
        return None


_HEREDOC = re.compile(r"(?<!<)<<(?!<)-?\s*(?:'([^']+)'|\"([^\"]+)\"|\\?([A-Za-z_][A-Za-z0-9_]*))")


def _heredoc_word(line: str) -> str | None:
    """The end word of a heredoc the line opens (`<<EOF`, `<<-'X'`); not `<<<` or `$((1<<2))`."""
    for m in _HEREDOC.finditer(line):
        before = line[: m.start()]
        if before.count("$((") > before.count("))"):
            continue  # a shift inside arithmetic
        return m.group(1) or m.group(2) or m.group(3)
    return None


def _incomplete(script: str) -> bool:
    """Whether bash would ask for more (`for … do` without `done`, an open quote): tree-sitter-bash
    reports an error or a missing node at the very end of the text."""
    import tree_sitter
    import tree_sitter_bash

    parser = tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))
    root = parser.parse(script.encode()).root_node
    if not root.has_error:
        return False
    end = len(script.encode().rstrip())
    stack = [root]
    while stack:
        node = stack.pop()
        if (node.is_missing or node.type == "ERROR") and node.end_byte >= end:
            return True
        stack.extend(node.children)
    return False


async def read_script() -> str | None:
    """A script from the prompt: a line ending in `\\`, an open heredoc, or an unfinished command
    (`for i in 1 2` … `done`) continues it; an empty line sends what there is."""
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
        elif (word := _heredoc_word(line)) is not None:
            heredoc = word
            continue
        if line.endswith("\\"):
            continue
        script = "\n".join(lines)
        if line.strip() and _incomplete(script):
            continue
        return script


class TerminalAnswerer:
    """Answers a server's elicitation at the terminal: shows the fields asked for, checks the answer."""

    async def elicit(self, server: str, params: Any) -> Any:
        import jsonschema
        import mcp_types as types

        schema = getattr(params, "requested_schema", None) or {"type": "object", "properties": {}}
        fields = schema.get("properties") or {}
        click.echo(f"\n[{escape(server)}] asks: {escape_lines(str(getattr(params, 'message', '')))}", err=True)
        for name, prop in fields.items():
            required = " (required)" if name in schema.get("required", []) else ""
            line = f"  {name}: {prop.get('type', 'any')}{required}  {prop.get('description', '')}".rstrip()
            click.echo(escape(line), err=True)
        for _ in range(3):
            answer = await _read("answer as JSON (empty = decline): ")
            if not answer:
                return types.ElicitResult(action="decline")
            content = _as_content(answer, fields)
            try:
                jsonschema.validate(content, schema)
            except jsonschema.ValidationError as e:
                click.echo(f"  that does not fit: {e.message}", err=True)
                continue
            return types.ElicitResult(action="accept", content=content)
        return types.ElicitResult(action="decline")


def _as_content(answer: str, fields: dict[str, Any]) -> Any:
    """JSON as typed; a bare word answers the only field there is."""
    try:
        return json.loads(answer)
    except ValueError:
        name = next(iter(fields), "value") if len(fields) <= 1 else "value"
        return {name: answer}


async def ask_approval(entry: Any, arguments: dict[str, Any], risk: Any) -> str:
    card = f"{entry.command} {json.dumps(arguments)} needs approval ({risk.why}): {risk.message}"
    click.echo("\n" + escape(card), err=True)
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
            _show(sys.stdout, result.stdout)
            _show(sys.stderr, result.stderr)
            if result.tools and result.tools.get("stopped"):
                click.echo(json.dumps(result.tools, indent=2), err=True)
            for hint in result.hints:
                click.echo(f"hint: {escape(hint)}", err=True)


def _show(stream: Any, text: str) -> None:
    """A script's output, with a server's terminal controls made visible when a person reads it."""
    stream.write(escape_lines(text) if stream.isatty() else text)
