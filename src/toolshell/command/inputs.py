"""Build a tool's input object from the `tools` arguments and stdin (DESIGN §4, "Input").

Precedence, low to high: stdin JSON, a JSON argument, then `key=value` pairs and `--key value`
flags in the order written. stdin is read only when the arguments contain `-` or there are no
input arguments at all: with only pairs and flags it is left alone, so a call inside
`… | while read n; do …; done` does not eat the loop's remaining lines.

A pair's value `@path` (`key=@path`, `--key=@path`, `--key @path`) is the file's content, read
exactly, as HTTPie's `key=@file` is: `key="$(cat path)"` would drop its trailing newlines. The
value then follows the pair rules (text for a string key, else JSON). A literal value that starts
with `@` is written `key=\\@text` (one backslash before a leading `@` is dropped; in a shell,
quote it: `'key=\\@text'`). Reading is the caller's (`FileReader`): this module stays pure.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from toolshell.errors import ErrorCode, ToolshellError
from toolshell.registry.validate import resolve_key


def _is_key(word: str) -> bool:
    """A key written before `=`: an identifier in any script (`repo`, `ключ`), plus `-` and `.`.

    Stricter than "anything before `=`" so that a stray URL such as `https://x?a=b` is reported
    as a stray word instead of becoming a strange key.
    """
    return word[:1] not in ("-", ".") and word.replace("-", "_").replace(".", "_").isidentifier()


FileReader = Callable[[str], str]
"""Reads a file of the shell for `key=@path` (the path as written); raises `ValueError` saying why not."""

FROM_FILE_AT_RUN_TIME = "key=@file is read while the script runs"
"""Why an input with `@file` cannot be built without a reader (the static checks leave it to run time)."""

STDIN_EMPTY = (
    "`-` reads the input from stdin, but stdin is empty; pipe a JSON object in, "
    "e.g. `jq -n '{repo: \"a/b\"}' | tools github list-pulls -`"
)


@dataclass
class _Args:
    objects: list[dict[str, Any]] = field(default_factory=list)
    pairs: list[tuple[str, str | bool]] = field(default_factory=list)
    wants_stdin: bool = False


def build_input(
    args: list[str], stdin: str | None, schema: dict[str, Any], read_file: FileReader | None = None
) -> dict[str, Any]:
    """Merge stdin, JSON arguments and key/value arguments into the tool's input object.

    Args:
        args: The input arguments (the words after the tool's name).
        stdin: The command's stdin, or None when there is none.
        schema: The tool's input schema; its `properties` decide which values stay text and
            how key spellings (`--repo-name`, `repo_name=`) map to property names.
        read_file: reads the file of a `key=@path` value; None: such a value is `invalid_input`
            (`FROM_FILE_AT_RUN_TIME`: the static checks judge that call when it runs).

    Returns:
        The merged input object (not yet validated against the schema).

    Raises:
        ToolshellError: `invalid_input` for a stray word, bad or non-object JSON, `-` with
            empty stdin, or a `@path` that cannot be read; the message shows the form to write instead.
    """
    parsed = _parse_args(args)
    merged: dict[str, Any] = {}
    if parsed.wants_stdin or not args:
        merged.update(_read_stdin(stdin, required=parsed.wants_stdin))
    for obj in parsed.objects:
        merged.update(obj)
    props = schema.get("properties") if isinstance(schema, dict) else None
    props = props if isinstance(props, dict) else {}
    for key, raw in parsed.pairs:
        name = resolve_key(key, schema)
        if not isinstance(raw, bool):
            raw = _from_file(key, raw, read_file)
        merged[name] = raw if isinstance(raw, bool) else _value(raw, props.get(name))
    return merged


def _from_file(key: str, raw: str, read_file: FileReader | None) -> str:
    """A pair's text: the file's content for `@path`, `@…` for `\\@…`, else the text as written."""
    if raw[:1] == "\\" and raw.lstrip("\\")[:1] == "@":
        return raw[1:]
    if raw[:1] != "@":
        return raw
    path = raw[1:]
    if not path:
        raise ToolshellError(
            ErrorCode.INVALID_INPUT, f"{key}=@ names no file; write {key}=@path, or {key}='\\@' for '@'"
        )
    if read_file is None:
        raise ToolshellError(ErrorCode.INVALID_INPUT, FROM_FILE_AT_RUN_TIME)
    try:
        return read_file(path)
    except ValueError as err:
        raise ToolshellError(
            ErrorCode.INVALID_INPUT,
            f"{key}=@{path} reads a file of the shell, but {err}; to send text that starts with @, "
            f"write '{key}=\\@{path}'",
        ) from None


def given_input(args: list[str]) -> dict[str, Any]:
    """What the words gave, for the record of a call whose input could not be built (a stray word,
    bad JSON, an unknown tool): pairs and flags as keys, so secret-looking keys are masked like
    any input's, JSON objects merged, and every other word kept in order under `"_words"`."""
    given: dict[str, Any] = {}
    words: list[str] = []
    for word in args:
        key, eq, value = word.removeprefix("--").partition("=")
        if word.lstrip()[:1] == "{":
            try:
                found = _loads(word)
            except ValueError:
                found = None
            if isinstance(found, dict):
                given.update(found)
                continue
        if eq and _is_key(key):
            given[key] = value
        elif word.startswith("--") and _is_key(key):
            given[key] = True
        else:
            words.append(word)
    if words:
        given["_words"] = words
    return given


def _parse_args(args: list[str]) -> _Args:
    out = _Args()
    i = 0
    while i < len(args):
        word = args[i]
        if word == "-":
            out.wants_stdin = True
        elif word.startswith("--"):
            i = _flag(args, i, out)
        elif word.lstrip()[:1] in ("{", "["):
            out.objects.append(_json_argument(word))
        elif (pair := word.partition("="))[1] and _is_key(pair[0]):
            out.pairs.append((pair[0], pair[2]))
        else:
            raise _stray(word)
        i += 1
    return out


def _flag(args: list[str], i: int, out: _Args) -> int:
    """Read `--key=value`, `--key value` or a bare `--flag` at `args[i]`; return the last index used."""
    body = args[i][2:]
    key, eq, value = body.partition("=")
    if not _is_key(key):
        raise _stray(args[i])
    if eq:
        out.pairs.append((key, value))
        return i
    nxt = args[i + 1] if i + 1 < len(args) else None
    if nxt is None or nxt.startswith("--"):
        out.pairs.append((key, True))
        return i
    out.pairs.append((key, nxt))
    return i + 1


def _stray(word: str) -> ToolshellError:
    return ToolshellError(
        ErrorCode.INVALID_INPUT,
        f"unexpected argument {word!r}; pass input as key=value, --key value, or a JSON object",
    )


def _json_argument(text: str) -> dict[str, Any]:
    try:
        value = _loads(text)
    except ValueError as err:
        raise ToolshellError(
            ErrorCode.INVALID_INPUT,
            f"the JSON argument is not valid JSON ({err}); write one object in single quotes, "
            'e.g. \'{"repo": "a/b"}\'',
        ) from None
    if not isinstance(value, dict):
        raise ToolshellError(
            ErrorCode.INVALID_INPUT,
            f"the JSON argument is {_kind(value)}, not an object: {_preview(value)}; pass one object, "
            'e.g. \'{"repo": "a/b"}\', or key=value pairs',
        )
    return value


def _read_stdin(stdin: str | None, *, required: bool) -> dict[str, Any]:
    text = stdin or ""
    if not text.strip():
        if required:
            raise ToolshellError(ErrorCode.INVALID_INPUT, STDIN_EMPTY)
        return {}
    try:
        value = _loads(text)
    except ValueError as err:
        raise ToolshellError(
            ErrorCode.INVALID_INPUT,
            f"stdin is not valid JSON ({err}); pipe one JSON object, or pass the input as key=value "
            "pairs (stdin is then left alone); a call with no input reads stdin, so inside a "
            "`while read` loop pass '{}'",
        ) from None
    if not isinstance(value, dict):
        raise ToolshellError(
            ErrorCode.INVALID_INPUT,
            f"stdin holds {_kind(value)}, not a JSON object: {_preview(value)}; pipe one object, "
            "e.g. `jq -n '{repo: \"a/b\"}' | tools github list-pulls`",
        )
    return value


MAX_DEPTH = 100
"""The deepest nesting of objects and arrays a JSON input may have. Python's parser has no bound of
its own that holds across versions (3.11 and 3.12 stop near 1,000 levels; 3.13 parsed 5,000), and
the call path walks an input recursively (masking, the timeline's preview, schema validation)."""


def _loads(text: str) -> Any:
    """`json.loads` without Python's NaN/Infinity extensions, which no tool can receive as JSON,
    and nested at most `MAX_DEPTH` levels."""

    def reject(name: str) -> Any:
        raise ValueError(f"{name} is not valid JSON")

    try:
        value = json.loads(text, parse_constant=reject)
    except RecursionError:  # too deep for any tool: treated like text that is not JSON
        raise ValueError(_TOO_DEEP) from None
    if isinstance(value, dict | list) and _too_deep(value):
        raise ValueError(_TOO_DEEP)
    return value


_TOO_DEEP = f"it is nested too deeply: more than {MAX_DEPTH} levels"


def _too_deep(value: Any) -> bool:
    """Whether lists and objects nest in `value` past `MAX_DEPTH`, found without recursion."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth > MAX_DEPTH:
                return True
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def _value(raw: str, prop: Any) -> Any:
    """A pair's value: JSON when it parses, unless the property accepts a string (then text as is)."""
    if _accepts_string(prop):
        return raw
    try:
        return _loads(raw)
    except ValueError:
        return raw


def _accepts_string(prop: Any) -> bool:
    if not isinstance(prop, dict):
        return False
    kind = prop.get("type")
    if kind == "string" or (isinstance(kind, list) and "string" in kind):
        return True
    if isinstance(prop.get("const"), str):
        return True
    enum = prop.get("enum")
    if isinstance(enum, list) and enum and all(isinstance(v, str) for v in enum):
        return True
    # `Optional[str]` arrives as anyOf [{type: string}, {type: null}] from pydantic-made schemas.
    return any(
        _accepts_string(branch) for combiner in ("anyOf", "oneOf", "allOf") for branch in (prop.get(combiner) or [])
    )


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "an object"
    return "an array" if isinstance(value, list) else "a string"


def _preview(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"
