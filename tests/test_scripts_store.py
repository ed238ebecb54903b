"""The saved-script store: save, replace, list, delete, and every refusal with its message."""

from __future__ import annotations

import pytest

from toolshell.errors import ErrorCode, ToolshellError
from toolshell.scripts import SavedScript, ScriptStore
from toolshell.store.sqlite import Store

SCHEMA = {"type": "object", "properties": {"repo": {"type": "string"}}, "required": ["repo"]}
BODY = 'repo=$(jq -r .repo)\ntools github list-pulls repo="$repo"\n'
EXAMPLE = '{"type":"object","properties":{"repo":{"type":"string"}},"required":["repo"]}'


class Ticks:
    """A clock that advances one second per reading."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        self.now += 1
        return self.now


def _store() -> ScriptStore:
    return ScriptStore(Store(":memory:"), clock=Ticks())


def _error(fn, *args, **kwargs) -> ToolshellError:
    with pytest.raises(ToolshellError) as info:
        fn(*args, **kwargs)
    return info.value


def test_save_returns_the_stored_script_and_get_finds_it():
    scripts = _store()
    saved = scripts.save("triage-prs", BODY, "Label new pull requests.", SCHEMA)
    assert saved == SavedScript("triage-prs", "Label new pull requests.", SCHEMA, BODY, 1001.0, 1001.0)
    assert scripts.get("triage-prs") == saved


def test_hyphens_and_underscores_name_the_same_script():
    scripts = _store()
    scripts.save("triage-prs", BODY, "d", SCHEMA)
    assert scripts.get("triage_prs") is not None
    assert scripts.get("triage_prs").name == "triage-prs"


def test_saving_an_existing_name_replaces_it_and_keeps_its_creation_time():
    scripts = _store()
    scripts.save("triage-prs", BODY, "first", SCHEMA)
    replaced = scripts.save("triage_prs", "echo two\n", "second")
    assert replaced == SavedScript("triage_prs", "second", {"type": "object"}, "echo two\n", 1001.0, 1002.0)
    assert scripts.list() == [replaced]


def test_list_is_sorted_by_name_and_delete_removes_one():
    scripts = _store()
    for name in ("zeta", "alpha", "mid-one"):
        scripts.save(name, "echo hi\n")
    assert [s.name for s in scripts.list()] == ["alpha", "mid-one", "zeta"]
    scripts.delete("mid_one")
    assert [s.name for s in scripts.list()] == ["alpha", "zeta"]
    assert scripts.get("mid-one") is None


def test_saved_scripts_survive_reopening_the_store(tmp_path):
    store = Store(tmp_path / "state.db")
    ScriptStore(store).save("keep", "echo kept\n", "d", SCHEMA)
    store.close()
    reopened = Store(tmp_path / "state.db")
    assert ScriptStore(reopened).require("keep").input_schema == SCHEMA
    reopened.close()


def test_deleting_or_requiring_a_missing_script_names_the_closest_ones():
    scripts = _store()
    scripts.save("triage-prs", BODY)
    error = _error(scripts.delete, "triage-pr")
    assert (error.code, error.message) == (
        ErrorCode.UNKNOWN_COMMAND,
        "no saved script named 'triage-pr'; did you mean triage-prs?",
    )
    error = _error(scripts.require, "zzz")
    assert error.message == "no saved script named 'zzz'; `tools scripts` lists the saved scripts"


NAME_RULE = (
    "is not a usable script name; use letters, digits, '-' and '_', starting with a letter or digit, "
    "at most 64 characters (e.g. triage-prs)"
)


@pytest.mark.parametrize("name", ["", "has space", "semi;colon", "-leading", "x" * 65, "ünïcode", "a/b"])
def test_an_unusable_name_is_refused_with_the_naming_rule(name):
    error = _error(_store().save, name, BODY)
    assert (error.code, error.message) == (ErrorCode.INVALID_INPUT, f"{name!r} {NAME_RULE}")


def test_a_name_of_exactly_64_characters_is_accepted():
    assert _store().save("x" * 64, BODY).name == "x" * 64


@pytest.mark.parametrize("name", ["save", "delete", "list", "help", "HELP"])
def test_words_of_the_scripts_command_cannot_name_a_script(name):
    error = _error(_store().save, name, BODY)
    assert error.message == (
        f"{name!r} is a word of the `tools scripts` command and cannot name a script; pick another name"
    )


def test_an_empty_body_is_refused_with_how_to_pipe_one():
    error = _error(_store().save, "empty", "  \n\t")
    assert (error.code, error.message) == (
        ErrorCode.INVALID_INPUT,
        "the script body is empty; pipe the script on stdin: cat script.sh | tools scripts save empty "
        "--description TEXT --input-schema JSON",
    )


@pytest.mark.parametrize("schema", [{"type": "string"}, {"properties": {}}, [], {"type": ["object", "null"]}])
def test_a_schema_that_is_not_an_object_schema_is_refused_with_an_example(schema):
    error = _error(_store().save, "s", BODY, "d", schema)
    assert (error.code, error.message) == (
        ErrorCode.INVALID_INPUT,
        f'the input schema must be a JSON Schema with "type": "object" at the top, e.g. {EXAMPLE}',
    )


def test_an_invalid_json_schema_is_refused_with_the_failing_place():
    schema = {"type": "object", "properties": {"repo": {"type": "strin"}}}
    error = _error(_store().save, "s", BODY, "d", schema)
    assert error.code == ErrorCode.INVALID_INPUT
    assert error.message.startswith("the input schema is not valid JSON Schema at properties.repo.type: ")
    assert error.message.endswith(f"; write e.g. {EXAMPLE}")


def test_a_refused_save_leaves_the_previous_script_untouched():
    scripts = _store()
    scripts.save("keep", BODY, "d", SCHEMA)
    _error(scripts.save, "keep", "", "d", SCHEMA)
    assert scripts.require("keep").body == BODY


def test_check_input_accepts_input_that_matches_the_schema():
    scripts = _store()
    script = scripts.save("s", BODY, "d", SCHEMA)
    scripts.check_input(script, {"repo": "acme/api"})


@pytest.mark.parametrize(
    ("input", "message"),
    [
        ({}, "input of script 's' at the top level: 'repo' is a required property; see tools scripts s --help"),
        ({"repo": 42}, "input of script 's' at repo: 42 is not of type 'string'; see tools scripts s --help"),
        (
            {"repo": "a", "labels": ["x", 3]},
            "input of script 's' at labels[1]: 3 is not of type 'string'; see tools scripts s --help",
        ),
        (
            ["repo"],
            "the input of script 's' must be a JSON object, e.g. tools scripts s key=value or '{\"key\": \"value\"}'",
        ),
    ],
)
def test_check_input_refuses_mismatching_input_with_the_failing_path(input, message):
    scripts = _store()
    labels = {"type": "array", "items": {"type": "string"}}
    schema = {**SCHEMA, "properties": {**SCHEMA["properties"], "labels": labels}}
    script = scripts.save("s", BODY, "d", schema)
    error = _error(scripts.check_input, script, input)
    assert (error.code, error.message) == (ErrorCode.INVALID_INPUT, message)


DANGLING = {"type": "object", "properties": {"repo": {"$ref": "#/$defs/repo"}}}


def test_check_input_with_a_dangling_ref_says_the_schema_cannot_be_used():
    script = SavedScript("s", "d", DANGLING, BODY, 1.0, 1.0)  # saved before save-time checks existed
    error = _error(_store().check_input, script, {"repo": "acme/api"})
    assert (error.code, error.message) == (
        ErrorCode.INVALID_INPUT,
        "the script's input schema cannot be used: its $ref '/$defs/repo' cannot be resolved; save it again "
        "with a fixed --input-schema (tools scripts save s --input-schema JSON)",
    )


def test_check_input_with_refs_that_loop_says_the_schema_cannot_be_used():
    script = SavedScript("s", "d", {"type": "object", "$ref": "#"}, BODY, 1.0, 1.0)
    error = _error(_store().check_input, script, {})
    assert (error.code, error.message) == (
        ErrorCode.INVALID_INPUT,
        "the script's input schema cannot be used: its $refs refer to each other without end; save it again "
        "with a fixed --input-schema (tools scripts save s --input-schema JSON)",
    )


@pytest.mark.parametrize(
    ("schema", "ref", "where"),
    [
        (DANGLING, "#/$defs/repo", "properties.repo"),
        ({"type": "object", "$defs": {"a": {}}, "allOf": [{"$ref": "#/$defs/b"}]}, "#/$defs/b", "allOf[0]"),
        ({"type": "object", "$ref": "#/properties/x"}, "#/properties/x", "the top level"),
    ],
)
def test_saving_a_schema_whose_local_ref_points_nowhere_is_refused(schema, ref, where):
    scripts = _store()
    error = _error(scripts.save, "s", BODY, "d", schema)
    assert (error.code, error.message) == (
        ErrorCode.INVALID_INPUT,
        f"the input schema's $ref {ref!r} at {where} points to nothing in the schema; define it (e.g. under "
        "$defs) or remove the $ref",
    )
    assert scripts.get("s") is None


def test_a_schema_whose_local_refs_resolve_is_saved_and_checks_input():
    schema = {
        "type": "object",
        "$defs": {"repo": {"type": "string"}, "a/b": {"type": "integer"}},
        "properties": {
            "repo": {"$ref": "#/$defs/repo"},
            "n": {"$ref": "#/$defs/a~1b"},
            "tags": {"type": "array", "items": {"$ref": "#/properties/repo"}},
            "kind": {"enum": [{"$ref": "#/not/a/reference"}]},
            "other": {"$id": "https://example.com/other", "$ref": "#/elsewhere"},
        },
    }
    scripts = _store()
    script = scripts.save("s", BODY, "d", schema)
    scripts.check_input(script, {"repo": "a", "n": 1, "tags": ["x"]})
    error = _error(scripts.check_input, script, {"n": "one"})
    assert error.message == "input of script 's' at n: 'one' is not of type 'integer'; see tools scripts s --help"
