"""Check a call's input against the tool's input schema before anything is sent; resolve key spellings.

Validators are compiled once per schema, keyed by the schema's canonical JSON, in a bounded LRU
cache, so a call costs one dictionary lookup plus the validation itself. A schema that is itself
invalid (or cannot be used: an unresolvable `$ref`, a bad regex) never blocks a call: the input
is let through, the server judges it, and `schema_problem` says what is wrong with the schema.
`$ref`s are resolved only inside the schema; nothing is fetched over the network. Regexes run on
RE2 (`linear_regex`), in linear time; a pattern RE2 cannot compile is skipped, with a note.

The work of a check is bounded too (`schema_cost`): a schema whose check could take more than
`MAX_PATHS` subschema visits is compiled to a check of `type: object` only, with a note. A
recursive schema, whose work grows with the input, gets a budget of `$ref` steps per check; one
check over it turns that schema into a `type: object` check as well, noted for `toolshell servers`.
"""

from __future__ import annotations

import json
import logging
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import referencing
from jsonschema.exceptions import SchemaError, best_match
from jsonschema.protocols import Validator
from jsonschema.validators import extend

from toolshell.errors import ErrorCode, ToolshellError
from toolshell.registry.entry import ToolEntry
from toolshell.registry.linear_regex import linear_validator, pattern_notes, schema_format_checker
from toolshell.registry.schema_cost import MAX_PATHS, OVER_NOTE, REF_KEYWORDS, paths

log = logging.getLogger(__name__)

CACHE_SIZE = 512
_MAX_MESSAGE = 300
_NO_REMOTE_REFS: referencing.Registry[Any] = referencing.Registry()  # empty: any remote `$ref` is unresolvable


@dataclass(frozen=True)
class _Compiled:
    validator: Validator | None
    problem: str | None = None
    notes: tuple[str, ...] = ()


_cache: OrderedDict[str, _Compiled] = OrderedDict()
_late_notes: OrderedDict[tuple[str, str], str] = OrderedDict()  # (server, tool) → found while checking
_steps = threading.local()  # `left`: `$ref` steps the check under way may still take
TOO_COSTLY = (
    f"checking an input against its recursive input schema took more than {MAX_PATHS:,} $ref steps; "
    "its input is now checked only for type object, and the server judges the rest"
)


class _OverBudget(Exception):
    """A check of a recursive schema used up its `$ref` steps."""


def _budgeted(keyword: Callable[..., Any]) -> Callable[..., Any]:
    """A `$ref`-like keyword that spends one step of the check under way each time it is followed."""

    def spend(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        left = getattr(_steps, "left", MAX_PATHS) - 1
        if left < 0:
            raise _OverBudget
        _steps.left = left
        return keyword(validator, value, instance, schema)

    return spend


def _with_ref_budget(cls: type[Validator]) -> type[Validator]:
    budgeted = {k: _budgeted(fn) for k, fn in cls.VALIDATORS.items() if k in REF_KEYWORDS}
    out: type[Validator] = extend(cls, budgeted)  # type: ignore[no-untyped-call]  # jsonschema's is untyped
    return out


def _canonical(schema: Any) -> str | None:
    try:
        return json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return None


def _compile(schema: dict[str, Any]) -> _Compiled:
    """Build a validator for the schema's draft (`$schema`; 2020-12 when absent or unknown)."""
    if not isinstance(schema, dict):
        return _Compiled(None, f"the input schema is a {type(schema).__name__}, not an object")
    with warnings.catch_warnings():  # an unknown `$schema` warns; we fall back to the latest draft
        warnings.simplefilter("ignore", DeprecationWarning)
        cls = linear_validator(schema)
        checker = schema_format_checker(schema)
    try:
        cls.check_schema(schema, format_checker=checker)  # type: ignore[call-arg]  # the protocol omits it
    except SchemaError as e:
        return _Compiled(None, f"the input schema is invalid at {_pointer(e.absolute_path)}: {_short(e.message)}")
    except RecursionError:
        return _Compiled(None, "the input schema is nested too deeply to check")
    cost = paths(schema)
    if cost.over:
        return _object_only(cls, OVER_NOTE)
    if cost.recursive:
        cls = _with_ref_budget(cls)
    return _Compiled(cls(schema, registry=_NO_REMOTE_REFS), notes=tuple(pattern_notes(schema)))


def _object_only(cls: type[Validator], note: str) -> _Compiled:
    """The check left for a schema that takes too much work: the input is an object."""
    return _Compiled(cls({"type": "object"}), notes=(note,))


_keys: dict[int, tuple[dict[str, Any], str | None]] = {}


def _key(schema: dict[str, Any]) -> str | None:
    """The cache key of a schema. A catalog hands one schema object to every call of a shell call,
    so the canonical JSON is remembered per object (held, so its id cannot be reused)."""
    hit = _keys.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    if len(_keys) >= CACHE_SIZE:
        _keys.clear()
    key = _canonical(schema)
    _keys[id(schema)] = (schema, key)
    return key


def _compiled(schema: dict[str, Any]) -> _Compiled:
    key = _key(schema)
    if key is None:
        return _Compiled(None, "the input schema is not plain JSON, or nested too deeply to check")
    found = _cache.get(key)
    if found is not None:
        _cache.move_to_end(key)
        return found
    found = _compile(schema)
    if found.problem:
        log.warning("%s; inputs are not checked against it", found.problem)
    for note in found.notes:
        log.info("%s", note)
    _cache[key] = found
    if len(_cache) > CACHE_SIZE:
        _cache.popitem(last=False)
    return found


def _mark_unusable(schema: dict[str, Any], problem: str) -> None:
    """Remember a schema that failed while validating, so later calls skip it without retrying."""
    log.warning("%s; inputs are not checked against it", problem)
    key = _canonical(schema)
    if key is not None and key in _cache:
        _cache[key] = _Compiled(None, problem)


def _mark_too_costly(entry: ToolEntry) -> None:
    """A recursive schema ran out of steps: from now on its inputs are checked only for type object."""
    log.warning("tool %s: %s", entry.command, TOO_COSTLY)
    key = _canonical(entry.input_schema)
    compiled = _cache.get(key) if key is not None else None
    if key is not None and compiled is not None and compiled.validator is not None:
        _cache[key] = _object_only(type(compiled.validator), TOO_COSTLY)
    _late_notes[(entry.server or "", entry.name)] = TOO_COSTLY
    if len(_late_notes) > CACHE_SIZE:
        _late_notes.popitem(last=False)


def late_notes(server: str) -> list[str]:
    """What checking found about this server's schemas after they were listed, for `toolshell servers`."""
    return [f"tool {tool}: {note}" for (name, tool), note in _late_notes.items() if name == server]


def schema_problem(schema: dict[str, Any]) -> str | None:
    """What is wrong with a tool's input schema, or None when it is usable. For diagnostics."""
    return _compiled(schema).problem


def schema_notes(schema: dict[str, Any]) -> list[str]:
    """What a usable schema leaves unchecked (patterns RE2 cannot run), for diagnostics."""
    compiled = _compiled(schema)
    return [compiled.problem] if compiled.problem else list(compiled.notes)


def validate_input(entry: ToolEntry, arguments: dict[str, Any]) -> None:
    """Check `arguments` against the tool's input schema.

    Args:
        entry: the tool being called.
        arguments: the merged input object.

    Raises:
        ToolshellError: `invalid_input`, naming the failing path (JSON pointer) and how to see the schema.
    """
    validator = _compiled(entry.input_schema).validator
    if validator is None:
        return
    try:
        # The common case first: `is_valid` stops at the first failure and builds no error objects.
        if _within_budget(validator.is_valid, arguments):
            return
        error = _within_budget(lambda a: best_match(validator.iter_errors(a)), arguments)
    except _OverBudget:
        _mark_too_costly(entry)
        return  # `arguments` is an object: all that is checked from now on
    except Exception as e:  # input faults are yielded, never raised: this is a fault of the schema
        _mark_unusable(entry.input_schema, f"the input schema cannot be used: {_short(str(e))}")
        return
    if error is None:
        return
    path = _pointer(error.absolute_path)
    raise ToolshellError(
        ErrorCode.INVALID_INPUT,
        f"input does not match the schema of {entry.command}: at {path}: {_short(_message(error))}. "
        f"Run `{entry.command} --help` for the schema.",
        detail={"path": path, "validator": error.validator},
    )


def _within_budget(check: Callable[[Any], Any], arguments: Any) -> Any:
    _steps.left = MAX_PATHS
    return check(arguments)


def _message(error: Any) -> str:
    """jsonschema's message, with JSON spellings (`true`, not `True`) for a type mismatch, and a hint
    when a bare `--flag` (which is `true`) stood where a value was wanted."""
    if error.validator != "type":
        return str(error.message)
    wanted = error.validator_value
    text = f"{json.dumps(error.instance, ensure_ascii=False)} is not of type {json.dumps(wanted)}"
    if error.instance is True and "boolean" not in (wanted if isinstance(wanted, list) else [wanted]):
        key = next((str(p) for p in reversed(error.absolute_path) if isinstance(p, str)), "key")
        text += f" (a bare --{key} means true; give it a value: --{key} VALUE or {key}=VALUE)"
    return text


def _pointer(path: Any) -> str:
    """A JSON pointer (`/items/0/name`); the whole input is `/`."""
    parts = [str(p).replace("~", "~0").replace("/", "~1") for p in path]
    return "/" + "/".join(parts)


def _short(message: str) -> str:
    """jsonschema quotes the failing value in full; keep a huge one from flooding the error line."""
    return message if len(message) <= _MAX_MESSAGE else message[: _MAX_MESSAGE - 1] + "…"


def _squash(name: str) -> str:
    return name.replace("-", "").replace("_", "").lower()


def resolve_key(key: str, schema: dict[str, Any]) -> str:
    """Map a key spelling (`--repo-name`, `repo_name`, `repoName`, `RepoName`) to the schema's property.

    Leading dashes are flag syntax and always dropped. Spellings are compared lower-case with `-`
    and `_` removed; an exact property name wins over a folded match. A key that matches no
    property comes back unchanged (the schema check reports it if `additionalProperties` is false).
    """
    name = key.lstrip("-") or key
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict) or name in properties:
        return name
    squashed = _squash(name)
    return next((p for p in properties if _squash(p) == squashed), name)
