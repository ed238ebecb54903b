"""JSON Schema validators whose regexes run in linear time (RE2), so a schema cannot stall the loop.

jsonschema matches `pattern`, `patternProperties` (and the `additionalProperties` /
`unevaluatedProperties` that depend on it) with Python's backtracking `re`: a server's
`"pattern": "^(a+)+$"` and forty `a`s followed by `!` take minutes, on the event loop that every
session shares. Here those keywords use google-re2, which has no backtracking. A pattern RE2
cannot compile (a lookahead, a backreference) is skipped, never handed to `re`, and
`pattern_notes` says which ones, for diagnostics. Checking the schema itself does not compile
its patterns with `re` either (`format: regex` of the meta-schema is left to RE2 here).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information
from jsonschema import FormatChecker
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import extend, validator_for

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would print each refused pattern on stderr
_MAX_NOTES = 5
_UNSUPPORTED = ("invalid perl operator", "invalid escape sequence", "invalid repetition size", "pattern too large")
"""RE2's refusals of a regex that is well formed but uses what RE2 lacks (lookaround, backreferences,
`\\Z`, huge counts). Any other RE2 error means the pattern is malformed in every engine."""


@functools.lru_cache(maxsize=1024)
def _compiled(pattern: str) -> tuple[Any | None, str]:
    try:
        return re2.compile(pattern, options=_OPTIONS), ""
    except re2.error as e:
        reason = e.args[0] if e.args else b""
        return None, reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)


def linear(pattern: str) -> Any | None:
    """The compiled RE2 pattern, or None when RE2 cannot compile it."""
    return _compiled(pattern)[0]


def _is_regex(instance: object) -> bool:
    """`format: regex` of the meta-schema: false only for a malformed pattern. One RE2 merely
    lacks a feature for is skipped when matching, and named by `pattern_notes`."""
    if not isinstance(instance, str):
        return True
    regex, reason = _compiled(instance)
    return regex is not None or reason.startswith(_UNSUPPORTED)


def _pattern(validator: Any, patrn: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and isinstance(patrn, str):
        regex = linear(patrn)
        if regex is not None and not regex.search(instance):
            yield ValidationError(f"{instance!r} does not match {patrn!r}")


def _pattern_properties(validator: Any, patterns: dict[str, Any], instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        regex = linear(pattern)
        if regex is None:
            continue
        for key, value in instance.items():
            if regex.search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _extras(instance: dict[str, Any], schema: dict[str, Any]) -> set[str]:
    """Keys neither `properties` nor `patternProperties` cover. A skipped pattern might have
    covered any key, so with one there are no extras (the server judges)."""
    regexes = [linear(p) for p in schema.get("patternProperties", {})]
    if None in regexes:
        return set()
    properties = schema.get("properties", {})
    return {k for k in instance if k not in properties and not any(r.search(k) for r in regexes if r is not None)}


def _additional_properties(validator: Any, ap: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    extras = _extras(instance, schema)
    if validator.is_type(ap, "object"):
        for extra in sorted(extras):
            yield from validator.descend(instance[extra], ap, path=extra)
    elif not ap and extras:
        if "patternProperties" in schema:
            patterns = ", ".join(repr(p) for p in sorted(schema["patternProperties"]))
            names = ", ".join(repr(e) for e in sorted(extras))
            verb = "does" if len(extras) == 1 else "do"
            yield ValidationError(f"{names} {verb} not match any of the regexes: {patterns}")
        else:
            names = ", ".join(repr(e) for e in sorted(extras))
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(f"Additional properties are not allowed ({names} {verb} unexpected)")


def _not_checked(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    return iter(())


def _walk(schema: Any) -> Iterator[dict[str, Any]]:
    """Every object in the schema, without recursion (a schema may be nested very deep)."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            yield node
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def _patterns(schema: Any) -> Iterator[str]:
    for node in _walk(schema):
        if isinstance(node.get("pattern"), str):
            yield node["pattern"]
        if isinstance(node.get("patternProperties"), dict):
            yield from node["patternProperties"]


def _unevaluated_with_patterns(schema: Any) -> bool:
    """jsonschema's `unevaluatedProperties` re-matches `patternProperties` with `re` inside."""
    nodes = list(_walk(schema))
    return any("unevaluatedProperties" in n for n in nodes) and any("patternProperties" in n for n in nodes)


def pattern_notes(schema: Any) -> list[str]:
    """What this schema's patterns leave unchecked, for diagnostics."""
    bad = sorted({p for p in _patterns(schema) if linear(p) is None})
    notes = []
    if bad:
        shown = ", ".join(repr(p[:80]) for p in bad[:_MAX_NOTES])
        notes.append(f"pattern(s) {shown} are not checked: the linear-time engine (RE2) cannot compile them")
    if _unevaluated_with_patterns(schema):
        notes.append("unevaluatedProperties is not checked in a schema that also has patternProperties")
    return notes


def linear_validator(schema: dict[str, Any]) -> type[Validator]:
    """The validator class for this schema's draft, with RE2 for every regex keyword."""
    base = validator_for(schema)
    keywords: dict[str, Any] = {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
    }
    if _unevaluated_with_patterns(schema):
        keywords["unevaluatedProperties"] = _not_checked
    cls: type[Validator] = extend(base, {k: v for k, v in keywords.items() if k in base.VALIDATORS})  # type: ignore[no-untyped-call]
    return cls


def schema_format_checker(schema: dict[str, Any]) -> FormatChecker:
    """The meta-schema's format checks, with `regex` judged by RE2 instead of `re`."""
    meta = validator_for(validator_for(schema).META_SCHEMA, default=validator_for(schema))
    checker = FormatChecker(())
    checker.checkers = {**meta.FORMAT_CHECKER.checkers, "regex": (_is_regex, ())}
    return checker
