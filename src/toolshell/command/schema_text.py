"""A tool's input schema as a few readable lines, and an example call built from it.

One line per property: `name  type  (required)  description (one of: …; default: …)`, nested
object properties indented beneath. Local `$ref`s (`#/$defs/…`, as pydantic writes them) are
followed so nested models show their fields too, unless following them could multiply without
end (a recursive schema, or one over `schema_cost.MAX_PATHS`): then no `$ref` is followed.
"""

from __future__ import annotations

import json
import shlex
import string
from typing import Any

from toolshell.registry.schema_cost import paths

_MAX_DEPTH = 3
_KEY_START = frozenset(string.ascii_letters + "_")
_KEY_CHARS = _KEY_START | frozenset(string.digits + ".-")


def _simple_key(name: str) -> bool:
    """`[A-Za-z_][A-Za-z0-9_.-]*`, by set lookups (a schema's keys come from the server)."""
    return name[:1] in _KEY_START and all(ch in _KEY_CHARS for ch in name)


def schema_lines(schema: dict[str, Any]) -> list[str]:
    """Lines describing the properties of an object schema, indented by two spaces a level.

    Args:
        schema: A JSON Schema for an object (a tool's input schema).

    Returns:
        One line per property (nested properties follow their parent); `[]` when there are none.
    """
    return _lines(schema, _refs_root(schema), "  ", 0)


def _refs_root(schema: dict[str, Any]) -> dict[str, Any]:
    """Where `$ref`s are looked up: the schema, or nowhere when following them could multiply."""
    cost = paths(schema)
    return {} if cost.over or cost.recursive else schema


def _lines(node: dict[str, Any], root: dict[str, Any], indent: str, depth: int) -> list[str]:
    props = node.get("properties")
    if not isinstance(props, dict) or not props:
        return []
    required = set(node.get("required") or [])
    # A subschema may be a boolean (`true` = anything, `false` = nothing): shown as `any`.
    resolved = {name: _as_dict(_deref(prop, root)) for name, prop in props.items()}
    types = {name: type_name(prop, root) for name, prop in resolved.items()}
    name_w = max(len(n) for n in props)
    type_w = max(len(t) for t in types.values())
    out: list[str] = []
    for name, prop in resolved.items():
        parts = [name.ljust(name_w), types[name].ljust(type_w)]
        if name in required:
            parts.append("(required)")
        detail = _detail(prop)
        if detail:
            parts.append(detail)
        out.append((indent + "  ".join(parts)).rstrip())
        child = _child_object(prop, root)
        if child is not None and depth < _MAX_DEPTH:
            out += _lines(child, root, indent + "  ", depth + 1)
    return out


def _as_dict(prop: Any) -> dict[str, Any]:
    return prop if isinstance(prop, dict) else {}


def type_name(prop: Any, root: dict[str, Any]) -> str:
    """A short type: `string`, `integer`, `string|null`, `array of string`, `object`, `any`."""
    prop = _deref(prop, root)
    if not isinstance(prop, dict):
        return "any"
    kind = prop.get("type")
    if isinstance(kind, list):
        return "|".join(str(k) for k in kind)
    if kind == "array":
        items = _deref(prop.get("items"), root)
        return f"array of {type_name(items, root)}" if isinstance(items, dict) and items else "array"
    if isinstance(kind, str):
        return kind
    for combiner in ("anyOf", "oneOf"):
        branches = prop.get(combiner)
        if isinstance(branches, list) and branches:
            names = dict.fromkeys(type_name(b, root) for b in branches)
            return "|".join(names)
    if "enum" in prop or "const" in prop:
        values = prop.get("enum") or [prop.get("const")]
        return "|".join(dict.fromkeys(_json_type(v) for v in values))
    if "properties" in prop:
        return "object"
    return "any"


def _detail(prop: dict[str, Any]) -> str:
    text = " ".join(str(prop.get("description") or "").split())
    extras = []
    choices = _choices(prop)
    if choices:
        extras.append("one of: " + ", ".join(_json(v) for v in choices))
    if "default" in prop:
        extras.append("default: " + _json(prop["default"]))
    if extras:
        text = f"{text} ({'; '.join(extras)})".strip()
    return text


def _choices(prop: dict[str, Any]) -> list[Any]:
    """The enum values, also from `anyOf` branches (pydantic writes `Optional[Literal]` that way)."""
    if isinstance(prop.get("enum"), list):
        return list(prop["enum"])
    values: list[Any] = []
    for combiner in ("anyOf", "oneOf"):
        for branch in prop.get(combiner) or []:
            if isinstance(branch, dict) and isinstance(branch.get("enum"), list):
                values += [v for v in branch["enum"] if v not in values]
    return values


def _child_object(prop: dict[str, Any], root: dict[str, Any]) -> dict[str, Any] | None:
    """The object whose properties belong indented under `prop` (itself, or its array items)."""
    if isinstance(prop.get("properties"), dict):
        return prop
    items = _deref(prop.get("items"), root)
    if isinstance(items, dict) and isinstance(items.get("properties"), dict):
        return items
    for combiner in ("anyOf", "oneOf"):
        for branch in prop.get(combiner) or []:
            branch = _deref(branch, root)
            if isinstance(branch, dict) and isinstance(branch.get("properties"), dict):
                return branch
    return None


def _deref(prop: Any, root: dict[str, Any]) -> Any:
    """Follow a local `$ref` (`#/$defs/X`, `#/definitions/X`) once; anything else as is."""
    if not isinstance(prop, dict) or not isinstance(prop.get("$ref"), str):
        return prop
    ref = prop["$ref"]
    if not ref.startswith("#/"):
        return prop
    node: Any = root
    for part in ref[2:].split("/"):
        node = node.get(part) if isinstance(node, dict) else None
    if not isinstance(node, dict):
        return prop
    merged = {k: v for k, v in prop.items() if k != "$ref"}
    return {**node, **merged}


SIGNATURE_ARGS = 8
"""Arguments a signature names; past it, `+N more` (a server's help line stays short)."""
_NAME_CHARS = 32
_CHOICE_CHARS = 40


def signature(schema: dict[str, Any]) -> str:
    """A tool's arguments on one line, required first: `path=<string> [head=<number>]`.

    Bounded: at most `SIGNATURE_ARGS` arguments (then `+N more`), names cut at 32 characters,
    an object's fields named but not described, a few short enum values spelled out.
    """
    found = schema.get("properties") if isinstance(schema, dict) else None
    props: dict[str, Any] = found if isinstance(found, dict) else {}
    required = [n for n in (schema.get("required") or []) if n in props] if props else []
    order = list(dict.fromkeys([*required, *props]))
    root = _refs_root(schema)
    words = []
    for name in order[:SIGNATURE_ARGS]:
        word = f"{_short(str(name), _NAME_CHARS)}=<{_short_type(_deref(props[name], root), root)}>"
        words.append(word if name in required else f"[{word}]")
    if len(order) > SIGNATURE_ARGS:
        words.append(f"+{len(order) - SIGNATURE_ARGS} more")
    return " ".join(words)


def _short_type(prop: Any, root: dict[str, Any]) -> str:
    """`type_name`, with short enums spelled out and an object's (or items') field names."""
    if isinstance(prop, dict):
        choices = [v for v in _choices(prop) if isinstance(v, str)]
        if choices and len("|".join(choices)) <= _CHOICE_CHARS:
            return "|".join(choices)
        child = _child_object(prop, root)
        if child is not None:
            fields = _field_names(child)
            kind = type_name(prop, root)
            return f"{'array of ' if kind.startswith('array') else ''}{{{fields}}}"
    return _short(type_name(prop, root), _CHOICE_CHARS)


def _field_names(node: dict[str, Any]) -> str:
    props = node.get("properties") or {}
    required = set(node.get("required") or [])
    names = [f"{_short(str(n), _NAME_CHARS)}{'' if n in required else '?'}" for n in list(props)[:SIGNATURE_ARGS]]
    more = len(props) - SIGNATURE_ARGS
    return ",".join(names) + (f",+{more} more" if more > 0 else "")


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def example_call(command: str, schema: dict[str, Any]) -> str:
    """An example call that passes every required property, e.g. `tools github get-pull repo=<string>`.

    Args:
        command: The tool's command (`tools github get-pull`).
        schema: The tool's input schema.

    Returns:
        The call as one line of shell.
    """
    found = schema.get("properties")
    props: dict[str, Any] = found if isinstance(found, dict) else {}
    words = [command]
    root = _refs_root(schema)
    words += [
        _example_arg(name, _deref(props[name], root), root)
        for name in schema.get("required") or []
        if name in props and _simple_key(name)
    ]
    return " ".join(words)


def _example_arg(name: str, prop: Any, root: dict[str, Any]) -> str:
    if isinstance(prop, dict):
        for key in ("const", "default"):
            if key in prop:
                return _pair(name, prop[key])
        if isinstance(prop.get("enum"), list) and prop["enum"]:
            return _pair(name, prop["enum"][0])
    kind = type_name(prop, root)
    if kind == "boolean":
        return f"--{name}"
    if kind.startswith("array"):
        return f"{name}='[…]'"
    if kind == "object":
        return f"{name}='{{…}}'"
    return f"{name}=<{kind}>"


def _pair(name: str, value: Any) -> str:
    text = value if isinstance(value, str) else _json(value)
    return shlex.quote(f"{name}={text}")


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if value is None:
        return "null"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object" if isinstance(value, dict) else "any"
