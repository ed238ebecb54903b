"""How much work checking an input against a schema can take, known before any input is checked.

jsonschema memoises nothing: every branch of an `anyOf` is tried, and every `$ref` is followed
anew each time it is reached. A server's `$defs` chain `a_i = anyOf[$ref a_i+1, $ref a_i+1]`
therefore doubles the work at each level, and 17 levels hold the event loop (every session) for
minutes on one wrong input. The work of a check grows with the number of *paths* from the root
to each subschema, not with the number of subschemas: a subschema reached two ways is visited
twice. `paths` counts them, following `$ref`s as the validator does, in time linear in the
schema (each subschema's count is computed once and reused) and capped, so even the count of an
astronomically expensive schema is cheap. A schema over the cap is checked only for `type: object`.

A `$ref` that leads back to a schema on its own path (a recursive schema: trees, expressions)
is counted once; its real work grows with the depth of the input, so it is also bounded while
checking (see `validate.py`).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import referencing
import referencing.jsonschema
from jsonschema.validators import validator_for
from jsonschema_specifications import REGISTRY as SPECIFICATIONS  # type: ignore[import-untyped]  # untyped

MAX_PATHS = 5_000
"""Subschema visits one check may take. At 15-40 µs a visit for `$ref`-heavy schemas, a wrong input
to a schema just under it takes 0.07-0.15 s; tool schemas are far below it (a large one: hundreds)."""

REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")
OVER_NOTE = (
    f"its input schema takes more than {MAX_PATHS:,} steps to check (nested anyOf/oneOf/allOf or $refs "
    "that multiply); its input is checked only for type object, and the server judges the rest"
)
_SINGLE = ("not", "if", "then", "else", "additionalProperties", "propertyNames", "unevaluatedProperties")
_SINGLE_ITEMS = ("items", "additionalItems", "contains", "unevaluatedItems")
_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
_MAPS = ("properties", "patternProperties", "dependentSchemas", "dependencies")
_IN_PLACE = ("allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas", *REF_KEYWORDS)
"""Keywords applied to the same instance; `unevaluated*` walks these a second time to learn what
they evaluated, so a schema with it costs them twice."""
_NO_REMOTE_REFS: referencing.Registry[Any] = SPECIFICATIONS.combine(referencing.Registry())
"""What the validator can resolve: the schema itself and the drafts' meta-schemas; nothing remote."""


@dataclass(frozen=True)
class Cost:
    """What `paths` found."""

    paths: int
    """Subschema visits of one check (at most `MAX_PATHS` + 1: past the cap counting stops)."""
    recursive: bool
    """Some `$ref` leads back to a schema on its own path."""

    @property
    def over(self) -> bool:
        return self.paths > MAX_PATHS


def cost_note(schema: Any) -> str | None:
    """What `toolshell servers` says about an input schema over the bound, or None."""
    return OVER_NOTE if paths(schema).over else None


def paths(schema: Any) -> Cost:
    """The cost of checking an input against `schema` (a tool's input schema, possibly malformed)."""
    if not isinstance(schema, dict):
        return Cost(1, False)
    if not _has_refs(schema):  # a tree: no resolver needed (the common case, and 5x cheaper)
        return _count(schema, None, None)
    try:
        spec = _specification(schema)
        resolver = _NO_REMOTE_REFS.resolver_with_root(spec.create_resource(schema))
    except Exception:  # noqa: BLE001 - a schema the resolver cannot take: count it without its `$ref`s
        return _count(schema, None, None)
    return _count(schema, resolver, spec)


@dataclass
class _Frame:
    node: dict[str, Any]
    children: Iterator[tuple[Any, Any]]
    total: int = 1


@dataclass
class _Walk:
    done: dict[int, int] = field(default_factory=dict)  # id(subschema) → its paths
    on_path: set[int] = field(default_factory=set)
    recursive: bool = False


def _count(root: dict[str, Any], resolver: Any, spec: Any) -> Cost:
    """Paths of the schema graph from `root`: depth first without recursion (a schema may be deep)."""
    walk = _Walk()
    frames = [_Frame(root, _children(root, resolver, spec))]
    walk.on_path.add(id(root))
    while frames:
        frame = frames[-1]
        if frame.total > MAX_PATHS:
            return Cost(MAX_PATHS + 1, walk.recursive)
        step = next(frame.children, None)
        if step is None:
            frames.pop()
            walk.on_path.discard(id(frame.node))
            walk.done[id(frame.node)] = frame.total
            if frames:
                frames[-1].total += frame.total
            continue
        child, child_resolver = step
        frame.total += _known(child, walk)
        if isinstance(child, dict) and id(child) not in walk.done and id(child) not in walk.on_path:
            walk.on_path.add(id(child))
            frames.append(_Frame(child, _children(child, child_resolver, spec)))
    return Cost(min(walk.done[id(root)], MAX_PATHS + 1), walk.recursive)


def _known(child: Any, walk: _Walk) -> int:
    """The paths a child adds without being walked: 0 for a new subschema (its frame adds them)."""
    if not isinstance(child, dict):
        return 1  # a boolean schema
    key = id(child)
    if key in walk.done:
        return walk.done[key]
    if key in walk.on_path:
        walk.recursive = True
        return 1
    return 0


def _children(node: dict[str, Any], resolver: Any, spec: Any) -> Iterator[tuple[Any, Any]]:
    """Every subschema the validator applies from `node`, with the resolver it would use there."""
    for sub in _subschemas(node):
        yield sub, _within(sub, resolver, spec)
    if "unevaluatedProperties" in node or "unevaluatedItems" in node:
        for sub in _subschemas(node, _IN_PLACE):
            yield sub, _within(sub, resolver, spec)
    for keyword in REF_KEYWORDS:
        ref = node.get(keyword)
        if not isinstance(ref, str) or resolver is None:
            continue
        try:
            resolved = resolver.lookup(ref)
        except Exception:  # noqa: BLE001 - unresolvable: checking fails on it, and the schema is let through
            continue
        yield resolved.contents, resolved.resolver


def _subschemas(node: dict[str, Any], only: tuple[str, ...] | None = None) -> Iterator[Any]:
    def wanted(keyword: str) -> bool:
        return keyword in node and (only is None or keyword in only)

    for keyword in (*_SINGLE, *_SINGLE_ITEMS):
        if wanted(keyword) and isinstance(node[keyword], dict | bool):
            yield node[keyword]
    for keyword in _LISTS:
        if wanted(keyword) and isinstance(node[keyword], list):
            yield from (s for s in node[keyword] if isinstance(s, dict | bool))
    for keyword in _MAPS:
        if wanted(keyword) and isinstance(node[keyword], dict):
            yield from (s for s in node[keyword].values() if isinstance(s, dict | bool))


def _within(sub: Any, resolver: Any, spec: Any) -> Any:
    """The resolver inside `sub` (its own `$id` moves the base of the `$ref`s below it)."""
    if not isinstance(sub, dict) or resolver is None:
        return resolver
    try:
        return resolver.in_subresource(spec.create_resource(sub))
    except Exception:  # noqa: BLE001 - a malformed `$id`: resolve from the enclosing base
        return resolver


def _has_refs(schema: dict[str, Any]) -> bool:
    """Whether any object in the schema has a `$ref`-like key (walked without recursion)."""
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if any(k in node for k in REF_KEYWORDS):
                return True
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def _specification(schema: dict[str, Any]) -> Any:
    """The referencing rules of the schema's draft, as the validator picks them."""
    with warnings.catch_warnings():  # an unknown `$schema` warns; the validator falls back to the latest draft
        warnings.simplefilter("ignore", DeprecationWarning)
        cls: Any = validator_for(schema)
    dialect = cls.ID_OF(cls.META_SCHEMA) or "urn:unknown-dialect"
    return referencing.jsonschema.specification_with(dialect, default=referencing.Specification.OPAQUE)
