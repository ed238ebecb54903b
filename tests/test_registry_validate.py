"""Input validation against a tool's schema, the validator cache, broken schemas, key spellings (DESIGN §4)."""

from __future__ import annotations

import copy
import logging
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from toolshell.errors import ErrorCode, ToolshellError
from toolshell.registry import ToolEntry, resolve_key, schema_problem, validate_input
from toolshell.registry import validate as validate_module
from toolshell.registry.schema_cost import MAX_PATHS, paths
from toolshell.registry.validate import late_notes, schema_notes

GET_PULL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "repo": {"type": "string"},
        "number": {"type": "integer"},
        "filter": {
            "type": "object",
            "properties": {
                "state": {"enum": ["open", "closed"]},
                "labels": {"type": "array", "items": {"type": "string"}},
            },
        },
        "reviewers": {"type": "array", "items": {"type": "object", "properties": {"login": {"type": "string"}}}},
    },
    "required": ["repo"],
    "additionalProperties": False,
}
GET_PULL = ToolEntry("github", "get_pull", input_schema=GET_PULL_SCHEMA)


@pytest.fixture(autouse=True)
def _empty_cache() -> Iterator[None]:
    validate_module._cache.clear()
    yield
    validate_module._cache.clear()
    validate_module._late_notes.clear()


@pytest.fixture
def compilations(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every schema `_compile` is asked to build a validator for."""
    seen: list[dict[str, Any]] = []
    real = validate_module._compile

    def counting(schema: dict[str, Any]) -> Any:
        seen.append(schema)
        return real(schema)

    monkeypatch.setattr(validate_module, "_compile", counting)
    return seen


def _message(entry: ToolEntry, arguments: dict[str, Any]) -> str:
    with pytest.raises(ToolshellError) as info:
        validate_input(entry, arguments)
    assert info.value.code == ErrorCode.INVALID_INPUT
    return info.value.message


def test_valid_input_passes() -> None:
    validate_input(GET_PULL, {"repo": "acme/api", "number": 7, "filter": {"labels": ["bug"]}})


def test_a_wrong_type_names_the_path_and_how_to_see_the_schema() -> None:
    assert _message(GET_PULL, {"repo": "acme/api", "number": "x"}) == (
        'input does not match the schema of tools github get-pull: at /number: "x" is not of type "integer". '
        "Run `tools github get-pull --help` for the schema."
    )


def test_a_nested_object_error_names_the_nested_path() -> None:
    assert _message(GET_PULL, {"repo": "a/b", "filter": {"state": "merged"}}) == (
        "input does not match the schema of tools github get-pull: at /filter/state: 'merged' is not one of "
        "['open', 'closed']. Run `tools github get-pull --help` for the schema."
    )


def test_an_array_error_names_the_item_index() -> None:
    assert _message(GET_PULL, {"repo": "a/b", "filter": {"labels": ["bug", 3]}}) == (
        "input does not match the schema of tools github get-pull: at /filter/labels/1: 3 is not of type "
        '"string". Run `tools github get-pull --help` for the schema.'
    )
    assert _message(GET_PULL, {"repo": "a/b", "reviewers": [{"login": "x"}, {"login": False}]}) == (
        "input does not match the schema of tools github get-pull: at /reviewers/1/login: false is not of type "
        '"string". Run `tools github get-pull --help` for the schema.'
    )


def test_a_missing_required_key_is_reported_at_the_top_level() -> None:
    with pytest.raises(ToolshellError) as info:
        validate_input(GET_PULL, {"number": 1})
    assert info.value.message == (
        "input does not match the schema of tools github get-pull: at /: 'repo' is a required property. "
        "Run `tools github get-pull --help` for the schema."
    )
    assert info.value.detail == {"path": "/", "validator": "required"}


def test_an_unknown_key_is_caught_when_additional_properties_are_false() -> None:
    assert _message(GET_PULL, {"repo": "a/b", "nmber": 1}) == (
        "input does not match the schema of tools github get-pull: at /: Additional properties are not allowed "
        "('nmber' was unexpected). Run `tools github get-pull --help` for the schema."
    )


def test_path_segments_are_escaped_as_json_pointer() -> None:
    entry = ToolEntry("s", "t", input_schema={"type": "object", "properties": {"a/b~c": {"type": "integer"}}})
    assert 'at /a~1b~0c: "x" is not of type "integer"' in _message(entry, {"a/b~c": "x"})


def test_a_bare_flag_where_a_value_was_wanted_says_how_to_give_one() -> None:
    assert (
        'at /number: true is not of type "integer" (a bare --number means true; give it a value: '
        "--number VALUE or number=VALUE)"
    ) in _message(GET_PULL, {"repo": "a/b", "number": True})


def test_a_huge_failing_value_is_cut_short_in_the_message() -> None:
    entry = ToolEntry("s", "t", input_schema={"type": "object", "properties": {"n": {"type": "integer"}}})
    message = _message(entry, {"n": "x" * 5000})
    assert len(message) < 500
    assert "…. Run `tools s t --help` for the schema." in message


# --- the validator cache ---------------------------------------------------------------------------


def test_a_schema_is_compiled_once_for_many_calls(compilations: list[dict[str, Any]]) -> None:
    for n in range(5):
        validate_input(GET_PULL, {"repo": "a/b", "number": n})
    with pytest.raises(ToolshellError):
        validate_input(GET_PULL, {"number": 1})
    assert compilations == [GET_PULL_SCHEMA]


def test_equal_schemas_in_different_objects_and_key_orders_share_one_validator(
    compilations: list[dict[str, Any]],
) -> None:
    reordered = dict(reversed(list(copy.deepcopy(GET_PULL_SCHEMA).items())))
    validate_input(GET_PULL, {"repo": "a/b"})
    validate_input(ToolEntry("mirror", "get_pull", input_schema=reordered), {"repo": "a/b"})
    assert len(compilations) == 1


def test_the_cache_is_bounded_and_drops_the_least_recently_used(
    compilations: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(validate_module, "CACHE_SIZE", 2)
    entries = [ToolEntry("s", f"t{i}", input_schema={"type": "object", "title": f"t{i}"}) for i in range(3)]
    validate_input(entries[0], {})
    validate_input(entries[1], {})
    validate_input(entries[0], {})  # t0 is now the most recently used
    validate_input(entries[2], {})  # evicts t1
    assert len(validate_module._cache) == 2
    validate_input(entries[0], {})
    validate_input(entries[1], {})
    assert [s["title"] for s in compilations] == ["t0", "t1", "t2", "t1"]


# --- broken schemas -----------------------------------------------------------------------------------


def test_an_invalid_schema_lets_the_input_through_and_is_noted(caplog: pytest.LogCaptureFixture) -> None:
    broken = {"type": "object", "properties": {"n": {"type": "integr"}}}
    entry = ToolEntry("s", "t", input_schema=broken)
    with caplog.at_level(logging.WARNING, logger="toolshell.registry.validate"):
        validate_input(entry, {"n": "anything"})
        validate_input(entry, {"n": "again"})
    assert schema_problem(broken) == (
        "the input schema is invalid at /properties/n/type: 'integr' is not valid under any of the given schemas"
    )
    assert [r.getMessage() for r in caplog.records] == [f"{schema_problem(broken)}; inputs are not checked against it"]


def test_a_schema_with_a_bad_regex_is_tolerated() -> None:
    broken = {"type": "object", "properties": {"n": {"type": "string", "pattern": "("}}}
    validate_input(ToolEntry("s", "t", input_schema=broken), {"n": "x"})
    assert schema_problem(broken) == "the input schema is invalid at /properties/n/pattern: '(' is not a 'regex'"


def test_a_remote_ref_is_never_fetched_and_the_schema_is_tolerated(
    compilations: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    fetched: list[Any] = []
    monkeypatch.setattr(urllib.request, "urlopen", lambda *a, **k: fetched.append(a))
    remote = {"type": "object", "properties": {"n": {"$ref": "http://127.0.0.1:9/never.json"}}}
    entry = ToolEntry("s", "t", input_schema=remote)
    validate_input(entry, {"n": 1})
    validate_input(entry, {"n": 2})
    assert fetched == []
    assert schema_problem(remote) == "the input schema cannot be used: Unresolvable: http://127.0.0.1:9/never.json"
    assert len(compilations) == 1


def test_local_refs_and_older_drafts_are_validated() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "definitions": {"count": {"type": "integer", "minimum": 0}},
        "properties": {"n": {"$ref": "#/definitions/count"}},
    }
    assert "at /n: -1 is less than the minimum of 0" in _message(ToolEntry("s", "t", input_schema=schema), {"n": -1})
    assert schema_problem(schema) is None


def test_a_schema_that_is_not_an_object_is_tolerated() -> None:
    entry = ToolEntry("s", "t", input_schema=["not", "a", "schema"])  # type: ignore[arg-type]
    validate_input(entry, {"x": 1})
    assert schema_problem(entry.input_schema) == "the input schema is a list, not an object"


# --- key spellings ------------------------------------------------------------------------------------


SCHEMA = {"type": "object", "properties": {"repoName": {"type": "string"}, "pull_number": {"type": "integer"}}}


@pytest.mark.parametrize("spelling", ["--repo-name", "repo_name", "repoName", "RepoName", "repo-name", "REPONAME"])
def test_key_spellings_resolve_to_the_schema_property(spelling: str) -> None:
    assert resolve_key(spelling, SCHEMA) == "repoName"


def test_key_spellings_resolve_snake_case_properties_too() -> None:
    assert resolve_key("--pull-number", SCHEMA) == "pull_number"
    assert resolve_key("pullNumber", SCHEMA) == "pull_number"


def test_an_exact_property_name_wins_over_a_folded_match() -> None:
    schema: dict[str, Any] = {"properties": {"repo_name": {}, "repoName": {}}}
    assert resolve_key("repoName", schema) == "repoName"
    assert resolve_key("repo_name", schema) == "repo_name"


def test_an_unknown_key_comes_back_unchanged_without_flag_dashes() -> None:
    assert resolve_key("colour", SCHEMA) == "colour"
    assert resolve_key("--colour", SCHEMA) == "colour"
    assert resolve_key("x", {"type": "object"}) == "x"


# --- the work of a check is bounded ---------------------------------------------------------------


def doubling_chain(depth: int) -> dict[str, Any]:
    """`a_i = anyOf[$ref a_i+1, $ref a_i+1]`: each level doubles the work of checking a wrong `x`."""
    defs: dict[str, Any] = {
        f"a{i}": {"anyOf": [{"$ref": f"#/$defs/a{i + 1}"}, {"$ref": f"#/$defs/a{i + 1}"}]} for i in range(depth)
    }
    defs[f"a{depth}"] = {"type": "string"}
    return {"type": "object", "properties": {"x": {"$ref": "#/$defs/a0"}}, "$defs": defs}


def test_a_schema_whose_check_multiplies_past_the_bound_is_checked_only_for_type_object() -> None:
    entry = ToolEntry("s", "deep", input_schema=doubling_chain(12))  # 2**14 visits for jsonschema
    validate_input(entry, {"x": 5})  # let through at once: the server judges it
    [note] = schema_notes(entry.input_schema)
    assert note == (
        f"its input schema takes more than {MAX_PATHS:,} steps to check (nested anyOf/oneOf/allOf or $refs "
        "that multiply); its input is checked only for type object, and the server judges the rest"
    )
    assert schema_problem(entry.input_schema) is None


def test_a_schema_under_the_bound_is_still_checked_in_full() -> None:
    entry = ToolEntry("s", "deep", input_schema=doubling_chain(3))
    assert "at /x: 5 is not valid under any of the given schemas" in _message(entry, {"x": 5})
    validate_input(entry, {"x": "text"})
    assert schema_notes(entry.input_schema) == []


@pytest.mark.parametrize(
    ("depth", "expected"), [(1, 7), (2, 15), (10, 4095), (11, MAX_PATHS + 1), (300, MAX_PATHS + 1)]
)
def test_the_cost_counts_every_path_to_a_subschema_and_stops_at_the_bound(depth: int, expected: int) -> None:
    assert paths(doubling_chain(depth)).paths == expected


def test_the_cost_of_a_recursive_schema_counts_each_cycle_once() -> None:
    cost = paths({"type": "object", "properties": {"left": {"$ref": "#"}, "right": {"$ref": "#"}}})
    assert (cost.paths, cost.recursive) == (5, True)


def test_the_cost_of_a_malformed_schema_is_counted_without_failing() -> None:
    malformed = {"properties": {"a": 5, "b": {"$ref": 7}}, "anyOf": "x", "$ref": "#/nowhere", "$id": 3, "items": [True]}
    assert paths(malformed).paths == 3


def branching_recursion() -> dict[str, Any]:
    """Two ways down to the same child at every level: the work doubles with each level of input."""
    down = {"properties": {"x": {"$ref": "#"}}}
    return {"type": "object", "anyOf": [down, {"properties": {"x": {"$ref": "#"}}}]}


def nested(depth: int, leaf: Any) -> dict[str, Any]:
    value: Any = leaf
    for _ in range(depth):
        value = {"x": value}
    return {"x": value}


def test_a_recursive_schema_that_runs_out_of_steps_is_then_checked_only_for_type_object() -> None:
    entry = ToolEntry("s", "tree", input_schema=branching_recursion())
    assert "is not valid under any of the given schemas" in _message(entry, nested(3, 5))  # checked in full
    validate_input(entry, nested(16, 5))  # 2**17 `$ref`s to follow: over the budget, let through
    assert late_notes("s") == [f"tool tree: {validate_module.TOO_COSTLY}"]
    assert late_notes("other") == []
    validate_input(entry, nested(3, 5))  # from now on: type object only
    assert schema_notes(entry.input_schema) == [validate_module.TOO_COSTLY]


def test_a_recursive_schema_checks_a_deep_input_whose_work_grows_with_its_size() -> None:
    tree: dict[str, Any] = {
        "type": "object",
        "properties": {"value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#"}}},
    }
    entry = ToolEntry("s", "tree", input_schema=tree)
    value: dict[str, Any] = {"value": "one"}
    for _ in range(30):  # 60 `$ref`s to follow, well within the budget
        value = {"value": 1, "children": [value, {"value": 2}]}
    assert f'at {"/children/0" * 30}/value: "one" is not of type "integer".' in _message(entry, value)
    assert late_notes("s") == []
