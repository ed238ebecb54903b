"""`toolshell shell`: one session at a prompt, for people. Approvals are asked on the spot."""

from __future__ import annotations

import io
import json
import re
import sys
from typing import Any

import anyio
import click

from toolshell.config import Config
from toolshell.frontends.console import say_waiting
from toolshell.safe_text import escape, escape_lines
from toolshell.utf8 import not_utf8

_BANNER = """toolshell — a sandboxed shell with every tool behind `tools`.
Try: tools --help · tools search <words> · tools plan <<'EOF' … EOF
An unfinished command (or a line ending in \\) continues on the next line; an empty line sends it.
Exit with Ctrl-D or `exit`."""


async def _read(prompt: str, prefill: str = "") -> str | None:
    """One line from the person; `prefill` is put on the line for editing (with readline)."""

    def read() -> str:
        sys.stderr.write(prompt)  # prompts go to stderr, so piped stdout holds only results
        sys.stderr.flush()
        hook = _prefill_hook(prefill)
        try:
            return input()
        finally:
            if hook is not None:
                hook.set_startup_hook(None)

    try:
        return await anyio.to_thread.run_sync(read)
    except EOFError:
        return None


def _prefill_hook(prefill: str) -> Any:
    """readline, with `prefill` inserted at the next prompt; None without readline or prefill."""
    if not prefill:
        return None
    try:
        import readline  # deliberate lazy import: not every platform has it
    except ImportError:
        return None
    readline.set_startup_hook(lambda: readline.insert_text(prefill))
    return readline


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
    # lazy: the interactive shell's own needs, loaded when it starts
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
        if message := not_utf8("the line", line, script=True):
            click.echo(f"toolshell: {message}", err=True)
            return ""  # the script it was part of is dropped: nothing runs half-read
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
    """Answers a server's elicitation at the terminal: shows the fields asked for (with their
    choices and defaults), pre-fills the defaults, checks the answer."""

    async def elicit(self, server: str, params: Any) -> Any:
        # lazy: the interactive shell's own needs, loaded when it starts
        import jsonschema
        import mcp_types as types

        if getattr(params, "mode", "form") == "url":
            return await _open_url(server, params)
        schema = getattr(params, "requested_schema", None) or {"type": "object", "properties": {}}
        fields = schema.get("properties") or {}
        click.echo(f"\n[{escape(server)}] asks: {escape_lines(str(getattr(params, 'message', '')))}", err=True)
        for name, prop in fields.items():
            click.echo(escape(f"  {_field_line(name, prop, name in schema.get('required', []))}"), err=True)
        defaults = {k: p["default"] for k, p in fields.items() if isinstance(p, dict) and "default" in p}
        prefill = json.dumps(defaults, ensure_ascii=False) if defaults else ""
        for _ in range(3):
            answer = await (_read(_ANSWER, prefill) if prefill else _read(_ANSWER))
            if not answer:
                return types.ElicitResult(action="decline")
            content = _as_content(answer, fields)
            try:
                jsonschema.validate(content, schema)
            except jsonschema.ValidationError as e:
                click.echo(f"  that does not fit: {escape(e.message)}", err=True)
                continue
            return types.ElicitResult(action="accept", content=content)
        return types.ElicitResult(action="decline")


_ANSWER = "answer as JSON (empty = decline): "


def _field_line(name: str, prop: Any, required: bool) -> str:
    """`name: type (required)  description  one of: a, b  [default: x]`."""
    prop = prop if isinstance(prop, dict) else {}
    words = [f"{name}: {prop.get('type', 'any')}{' (required)' if required else ''}", prop.get("description", "")]
    choices = _choices(prop)
    if choices:
        words.append("one of: " + ", ".join(f"{i}={c}" for i, c in enumerate(choices, 1)))
    if "default" in prop:
        words.append(f"[default: {json.dumps(prop['default'], ensure_ascii=False)}]")
    return "  ".join(w for w in words if w)


def _choices(prop: dict[str, Any]) -> list[Any]:
    """The values a field takes: `enum`, or the `const`s of `oneOf` / `anyOf` (titled enums)."""
    if isinstance(prop.get("enum"), list):
        return list(prop["enum"])
    options = prop.get("oneOf") or prop.get("anyOf") or []
    return [o["const"] for o in options if isinstance(o, dict) and "const" in o]


async def _open_url(server: str, params: Any) -> Any:
    # lazy: the interactive shell's own needs, loaded when it starts
    import mcp_types as types

    click.echo(f"\n[{escape(server)}] asks you to open: {escape(str(params.url))}", err=True)
    click.echo(f"  {escape_lines(str(params.message))}", err=True)
    done = (await _read("opened it and finished there? [y/N]: ") or "").strip().lower()
    return types.ElicitResult(action="accept" if done in ("y", "yes") else "decline")


def _as_content(answer: str, fields: dict[str, Any]) -> Any:
    """JSON as typed; a bare word (or a choice's number) answers the only field there is."""
    name = next(iter(fields), "value") if len(fields) <= 1 else "value"
    prop = fields.get(name)
    choices = _choices(prop) if isinstance(prop, dict) else []
    if answer.strip().isdigit() and 1 <= int(answer) <= len(choices):
        return {name: choices[int(answer) - 1]}
    try:
        return json.loads(answer)
    except ValueError:
        return {name: answer}


async def ask_approval(entry: Any, arguments: dict[str, Any], risk: Any) -> str:
    card = f"{entry.command} {json.dumps(arguments)} needs approval ({risk.why}): {risk.message}"
    click.echo("\n" + escape(card), err=True)
    answer = (await _read("allow? [y]es once / [a]lways / [N]o: ") or "").strip().lower()
    return {"y": "once", "yes": "once", "a": "always", "always": "always"}.get(answer, "deny")


async def interactive(config: Config, state_dir: str | None, role: str | None = None) -> None:
    # lazy: the interactive shell's own needs, loaded when it starts
    from toolshell.calls.approval import NamedApprover
    from toolshell.host import Host

    try:
        # lazy: the interactive shell's own needs, loaded when it starts
        import readline  # noqa: F401  (history and line editing for input())
    except ImportError:
        pass
    click.echo(_BANNER, err=True)
    if isinstance(sys.stdin, io.TextIOWrapper):  # bytes that are not UTF-8 arrive as text to refuse
        sys.stdin.reconfigure(errors="surrogateescape")
    # A person is at the prompt, so approvals are asked on the spot unless the config says otherwise.
    if "inline" not in config.approval.model_fields_set:
        config = config.model_copy(update={"approval": config.approval.model_copy(update={"inline": True})})
    async with Host.open(config, state_dir=state_dir, on_wait=say_waiting) as host:
        session = host.session(answerer=TerminalAnswerer(), source="cli", role=role)
        session.approver = NamedApprover(ask_approval, "the person at the terminal")
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
