"""Saved scripts: a name, a description, an input schema and a bash body, kept in SQLite.

Names fold `-` and `_` together (as tool names do), so `triage-prs` and `triage_prs` are one script.
Every mistake is an `invalid_input` error that says what to write instead.
"""

from __future__ import annotations

import builtins
import difflib
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolshell.config.names import check_name, fold
from toolshell.errors import ErrorCode, ToolshellError
from toolshell.store.protocol import StateStore

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

SCHEMA = """
CREATE TABLE IF NOT EXISTS saved_scripts (
    key TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    description TEXT NOT NULL,
    input_schema TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL
);
"""

EXAMPLE_SCHEMA = '{"type":"object","properties":{"repo":{"type":"string"}},"required":["repo"]}'
_COLUMNS = "name, description, input_schema, body, created_at, updated_at"


@dataclass(frozen=True)
class SavedScript:
    name: str
    description: str
    input_schema: dict[str, Any]
    body: str
    created_at: float
    updated_at: float


def check_schema(schema: Any) -> None:
    """Raise `invalid_input` unless `schema` is a valid JSON Schema for an object input."""
    # lazy: jsonschema is slow to import and only saving or running a script needs it
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise ToolshellError(
            ErrorCode.INVALID_INPUT,
            f'the input schema must be a JSON Schema with "type": "object" at the top, e.g. {EXAMPLE_SCHEMA}',
        )
    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as e:
        raise ToolshellError(
            ErrorCode.INVALID_INPUT,
            f"the input schema is not valid JSON Schema at {_path(e.absolute_path)}: {e.message}; "
            f"write e.g. {EXAMPLE_SCHEMA}",
        ) from None
    for where, ref in _local_refs(schema):
        if not _resolves(schema, ref):
            raise ToolshellError(
                ErrorCode.INVALID_INPUT,
                f"the input schema's $ref {ref!r} at {_path(where)} points to nothing in the schema; "
                "define it (e.g. under $defs) or remove the $ref",
            )


class ScriptStore:
    """Saved scripts in the `saved_scripts` table of a `Store`.

    Args:
        store: Where to keep them.
        clock: Unix seconds now; tests pass a fixed one.
    """

    def __init__(self, store: StateStore, clock: Callable[[], float] = time.time) -> None:
        store.migrate("saved_scripts", [SCHEMA])
        self._store = store
        self._clock = clock
        self._validators: dict[str, Validator] = {}

    def save(
        self, name: str, body: str, description: str = "", input_schema: dict[str, Any] | None = None
    ) -> SavedScript:
        """Save a script, or replace the one with the same (folded) name; returns what was stored.

        Args:
            name: Letters, digits, `-` and `_`, at most 64 characters.
            body: The bash script; must not be blank.
            description: One line shown by `tools scripts`.
            input_schema: A JSON Schema with `"type": "object"`; any object when None.
        """
        check_name(name)
        schema = {"type": "object"} if input_schema is None else input_schema
        check_schema(schema)
        if not body.strip():
            raise ToolshellError(
                ErrorCode.INVALID_INPUT,
                f"the script body is empty; pipe the script on stdin: cat script.sh | tools scripts save {name} "
                "--description TEXT --input-schema JSON",
            )
        now = self._clock()
        previous = self.get(name)
        created = previous.created_at if previous else now
        self._store.execute(
            f"INSERT INTO saved_scripts (key, {_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET "
            + ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS.split(", ")),
            [fold(name), name, description.strip(), _canonical(schema), body, created, now],
        )
        return SavedScript(name, description.strip(), schema, body, created, now)

    def get(self, name: str) -> SavedScript | None:
        """The script saved under `name` (hyphens and underscores alike), or None."""
        rows = self._store.query(f"SELECT {_COLUMNS} FROM saved_scripts WHERE key = ?", [fold(name)])
        return _script(rows[0]) if rows else None

    def require(self, name: str) -> SavedScript:
        """The script saved under `name`, or `unknown_command` naming the closest saved names."""
        script = self.get(name)
        if script is None:
            names = [s.name for s in self.list()]
            close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
            hint = f"; did you mean {', '.join(close)}?" if close else "; `tools scripts` lists the saved scripts"
            raise ToolshellError(ErrorCode.UNKNOWN_COMMAND, f"no saved script named {name!r}{hint}")
        return script

    def list(self) -> builtins.list[SavedScript]:
        """Every saved script, by name."""
        return [_script(r) for r in self._store.query(f"SELECT {_COLUMNS} FROM saved_scripts ORDER BY key")]

    def delete(self, name: str) -> None:
        """Delete a saved script; `unknown_command` when there is none by that name."""
        self.require(name)
        self._store.execute("DELETE FROM saved_scripts WHERE key = ?", [fold(name)])

    def check_input(self, script: SavedScript, input: Any) -> None:
        """Raise `invalid_input` with the failing path unless `input` matches the script's schema."""
        # lazy: jsonschema is slow to import and only saving or running a script needs it
        from jsonschema.exceptions import best_match
        from referencing.exceptions import Unresolvable

        if not isinstance(input, dict):
            raise ToolshellError(
                ErrorCode.INVALID_INPUT,
                f"the input of script {script.name!r} must be a JSON object, e.g. tools scripts {script.name} "
                f'key=value or \'{{"key": "value"}}\'',
            )
        try:
            error = best_match(self._validator(script.input_schema).iter_errors(input))
        except (Unresolvable, RecursionError, re.error) as e:
            # A schema saved before `check_schema` caught this, or broken in a way it cannot see.
            raise ToolshellError(
                ErrorCode.INVALID_INPUT,
                f"the script's input schema cannot be used: {_broken(e)}; save it again with a fixed "
                f"--input-schema (tools scripts save {script.name} --input-schema JSON)",
            ) from None
        if error is not None:
            raise ToolshellError(
                ErrorCode.INVALID_INPUT,
                f"input of script {script.name!r} at {_path(error.absolute_path)}: {error.message}; "
                f"see tools scripts {script.name} --help",
            )

    def _validator(self, schema: dict[str, Any]) -> Validator:
        # Compiled once per schema text: a script may be run many times by a trigger.
        key = _canonical(schema)
        if key not in self._validators:
            # lazy: jsonschema is slow to import and only saving or running a script needs it
            from jsonschema.validators import validator_for

            self._validators[key] = validator_for(schema)(schema)
        return self._validators[key]


def _script(row: Any) -> SavedScript:
    return SavedScript(
        row["name"], row["description"], json.loads(row["input_schema"]), row["body"], row["created_at"],
        row["updated_at"],
    )  # fmt: skip


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _broken(error: Exception) -> str:
    ref = getattr(error, "ref", None)
    if isinstance(ref, str):
        return f"its $ref {ref!r} cannot be resolved"
    if isinstance(error, RecursionError):
        return "its $refs refer to each other without end"
    return f"a pattern is not a valid regular expression ({error})"


# Keywords whose values are data, not subschemas: a "$ref" key inside them is not a reference.
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})


def _local_refs(schema: Any) -> builtins.list[tuple[tuple[Any, ...], str]]:
    """`(path, ref)` of every `$ref` that is a JSON pointer into this document (`#`, `#/…`).

    Subschemas with their own `$id` are skipped: their refs resolve against that id.
    """
    found: builtins.list[tuple[tuple[Any, ...], str]] = []
    stack: builtins.list[tuple[tuple[Any, ...], Any]] = [((), schema)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, dict):
            if path and "$id" in node:
                continue
            ref = node.get("$ref")
            if isinstance(ref, str) and (ref == "#" or ref.startswith("#/")):
                found.append((path, ref))
            stack.extend(((*path, k), v) for k, v in node.items() if k not in _DATA_KEYWORDS)
        elif isinstance(node, builtins.list):
            stack.extend(((*path, i), v) for i, v in enumerate(node))
    return sorted(found, key=lambda item: [str(p) for p in item[0]])


def _resolves(schema: Any, ref: str) -> bool:
    """Whether the JSON pointer in `ref` (`#/$defs/repo`) names a part of `schema`."""
    # lazy: jsonschema is slow to import and only saving or running a script needs it
    from urllib.parse import unquote

    node = schema
    for raw in unquote(ref[1:]).split("/")[1:]:
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, builtins.list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return False
    return True


def _path(parts: Any) -> str:
    """A JSON path a person can read: `repo`, `labels[0]`, or `the top level`."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "the top level"
