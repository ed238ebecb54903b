"""The `tools scripts …` grammar and its texts. Pure: no store, no shell, no I/O.

    tools scripts                                     list the saved scripts
    tools scripts NAME [k=v … | '{json}' | -]          run one (its input arrives on stdin as JSON)
    tools scripts NAME --help                         describe one
    tools scripts save NAME --description TEXT --input-schema JSON   (script body on stdin)
    tools scripts delete NAME

Run arguments are passed through untouched: the caller builds the input with the same code that
builds a tool's input, against the script's schema.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from toolshell.errors import ErrorCode, ToolshellError
from toolshell.scripts.store import EXAMPLE_SCHEMA, SavedScript

Verb = Literal["list", "save", "run", "delete", "help"]

MAX_DEPTH = 4
"""A saved script run from a saved script run from … stops at this depth (the seed's 'four deep')."""

USAGE = """\
tools scripts                          list the saved scripts
tools scripts NAME k=v …               run one; also NAME '{json}' or NAME - (input on stdin)
tools scripts NAME --help              show its description, input and body
tools scripts save NAME --description TEXT --input-schema JSON
                                       save the script piped on stdin (needs manage_scripts;
                                       a person saves with `toolshell scripts save …` without it)
tools scripts delete NAME              delete one (needs manage_scripts; or `toolshell scripts delete`)
The input is checked against the script's schema and reaches the script on stdin as JSON.
A saved script has no network of its own (curl, wget and http refuse); it calls tools, web-fetch
included, under the caller's tools, approvals and call budget, like any other tool call.
"""

_SAVE_FORM = "cat script.sh | tools scripts save NAME --description TEXT --input-schema JSON"
_HELP_FLAGS = ("--help", "-h")


@dataclass(frozen=True)
class ScriptsRequest:
    """One parsed `tools scripts …` command.

    `name` is None for `list` and for `help` of the `scripts` command itself. `input_args` holds a
    run's input arguments exactly as written.
    """

    verb: Verb
    name: str | None = None
    description: str = ""
    input_schema: dict[str, Any] | None = None
    input_args: list[str] = field(default_factory=list)


def _invalid(message: str) -> ToolshellError:
    return ToolshellError(ErrorCode.INVALID_INPUT, message)


def parse_scripts_args(args: Sequence[str]) -> ScriptsRequest:
    """Parse the words after `tools scripts`.

    Raises:
        ToolshellError: `invalid_input` with the right form when the words fit no form.
    """
    if not args:
        return ScriptsRequest("list")
    head, rest = args[0], list(args[1:])
    if head in _HELP_FLAGS or (head in ("save", "delete") and len(rest) == 1 and rest[0] in _HELP_FLAGS):
        return ScriptsRequest("help")
    if head == "list":
        if rest:
            raise _invalid(f"`tools scripts list` takes no arguments; you wrote {' '.join(rest)!r}")
        return ScriptsRequest("list")
    if head == "save":
        return _parse_save(rest)
    if head == "delete":
        if len(rest) != 1 or rest[0].startswith("-"):
            raise _invalid("write `tools scripts delete NAME` with exactly one script name")
        return ScriptsRequest("delete", rest[0])
    if head.startswith("-"):
        raise _invalid(f"unexpected {head!r} after `tools scripts`; write a script name, `save` or `delete`:\n{USAGE}")
    if len(rest) == 1 and rest[0] in _HELP_FLAGS:
        return ScriptsRequest("help", head)
    return ScriptsRequest("run", head, input_args=rest)


def _parse_save(words: list[str]) -> ScriptsRequest:
    if not words or words[0].startswith("-"):
        raise _invalid(f"`tools scripts save` needs a name first: {_SAVE_FORM}")
    name = words[0]
    values: dict[str, str | None] = {"--description": "", "--input-schema": None}
    i = 1
    while i < len(words):
        flag, eq, value = words[i].partition("=")
        if flag not in values:
            raise _invalid(f"unexpected {words[i]!r} in `tools scripts save`; write: {_SAVE_FORM}")
        if not eq:
            if i + 1 >= len(words):
                raise _invalid(f"{flag} needs a value, e.g. {flag} {_example(flag)}")
            value, i = words[i + 1], i + 1
        values[flag] = value
        i += 1
    schema = _parse_schema(values["--input-schema"])
    return ScriptsRequest("save", name, description=values["--description"] or "", input_schema=schema)


def _example(flag: str) -> str:
    return f"'{EXAMPLE_SCHEMA}'" if flag == "--input-schema" else "'Label new pull requests.'"


def _parse_schema(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as e:
        raise _invalid(
            f"--input-schema is not valid JSON ({e.msg} at column {e.colno}); write e.g. '{EXAMPLE_SCHEMA}'"
        ) from None
    if not isinstance(schema, dict):
        raise _invalid(f"--input-schema must be a JSON object schema, e.g. '{EXAMPLE_SCHEMA}'")
    return schema


def check_can_save(manage_scripts: bool, verb: str = "save") -> None:
    """Refuse `save` (and `delete`) unless the config sets `manage_scripts`.

    Raises:
        ToolshellError: `denied`, naming the setting to change.
    """
    if not manage_scripts:
        doing = "deleting" if verb == "delete" else "saving"
        raise ToolshellError(
            ErrorCode.DENIED, f"{doing} scripts needs manage_scripts = true under [tools_in_shell] in the config"
        )


def check_depth(depth: int) -> None:
    """Refuse to start a saved script at nesting `depth` (1 = run from an ordinary script) past `MAX_DEPTH`.

    Raises:
        ToolshellError: `unavailable` (not retryable), saying how to restructure.
    """
    if depth > MAX_DEPTH:
        raise ToolshellError(
            ErrorCode.UNAVAILABLE,
            f"saved scripts can call each other up to {MAX_DEPTH} deep; this call would be depth {depth}. "
            "Call the inner script from an outer one instead, or merge the scripts",
        )


def list_text(scripts: Sequence[SavedScript]) -> str:
    """The text of `tools scripts`: one line per script with its description and input keys."""
    if not scripts:
        return f"no saved scripts yet; save one with: {_SAVE_FORM}\n"
    width = max(len(s.name) for s in scripts)
    lines = [f"{s.name:<{width}}  {s.description or '(no description)'}{_input_summary(s)}" for s in scripts]
    return "\n".join(lines) + "\nrun one with: tools scripts NAME k=v …   details: tools scripts NAME --help\n"


def _input_summary(script: SavedScript) -> str:
    props = script.input_schema.get("properties") or {}
    if not isinstance(props, dict) or not props:
        return ""
    required = set(script.input_schema.get("required") or [])
    return "  (input: " + ", ".join(f"{k}{'*' if k in required else ''}" for k in props) + ")"


def script_help(script: SavedScript) -> str:
    """The text of `tools scripts NAME --help`: description, each input key, and the body."""
    lines = [f"tools scripts {script.name}", f"  {script.description or '(no description)'}", ""]
    props = script.input_schema.get("properties") or {}
    required = set(script.input_schema.get("required") or [])
    if isinstance(props, dict) and props:
        lines.append("input (key=value, --key value, '{json}' or - for stdin; * = required):")
        lines += [f"  {_property_line(k, v, k in required)}" for k, v in props.items()]
    else:
        lines.append("input: any JSON object (or none)")
    lines += ["", "script:", *(f"  {line}" for line in script.body.rstrip("\n").splitlines())]
    return "\n".join(lines) + "\n"


def _property_line(key: str, schema: Any, required: bool) -> str:
    if not isinstance(schema, dict):
        return f"{key}{'*' if required else ''}"
    kind = schema.get("type")
    parts = ["|".join(kind) if isinstance(kind, list) else str(kind or "any")]
    if "enum" in schema:
        parts.append("one of " + ", ".join(json.dumps(v) for v in schema["enum"]))
    if "default" in schema:
        parts.append(f"default {json.dumps(schema['default'])}")
    text = f"{key}{'*' if required else ''}: {'; '.join(parts)}"
    return f"{text} — {schema['description']}" if schema.get("description") else text
