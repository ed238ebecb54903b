"""The `tools scripts …` grammar, its texts, the manage_scripts refusal and the depth limit."""

from __future__ import annotations

import pytest

from toolshell.errors import ErrorCode, ToolshellError
from toolshell.scripts import (
    MAX_DEPTH,
    USAGE,
    SavedScript,
    ScriptsRequest,
    check_can_save,
    check_depth,
    list_text,
    parse_scripts_args,
    script_help,
)

SCHEMA_TEXT = '{"type":"object","properties":{"repo":{"type":"string"}},"required":["repo"]}'
SCHEMA = {"type": "object", "properties": {"repo": {"type": "string"}}, "required": ["repo"]}
SAVE_FORM = "cat script.sh | tools scripts save NAME --description TEXT --input-schema JSON"


def _error(args: list[str]) -> ToolshellError:
    with pytest.raises(ToolshellError) as info:
        parse_scripts_args(args)
    assert info.value.code == ErrorCode.INVALID_INPUT
    return info.value


@pytest.mark.parametrize(
    ("args", "request_"),
    [
        ([], ScriptsRequest("list")),
        (["list"], ScriptsRequest("list")),
        (["--help"], ScriptsRequest("help")),
        (["-h"], ScriptsRequest("help")),
        (["save", "--help"], ScriptsRequest("help")),
        (["delete", "-h"], ScriptsRequest("help")),
        (["triage-prs", "--help"], ScriptsRequest("help", "triage-prs")),
        (["triage-prs", "-h"], ScriptsRequest("help", "triage-prs")),
        (["delete", "triage-prs"], ScriptsRequest("delete", "triage-prs")),
        (["triage-prs"], ScriptsRequest("run", "triage-prs")),
        (["triage-prs", "repo=a/b"], ScriptsRequest("run", "triage-prs", input_args=["repo=a/b"])),
        (["triage-prs", '{"repo":"a/b"}'], ScriptsRequest("run", "triage-prs", input_args=['{"repo":"a/b"}'])),
        (["triage-prs", "-"], ScriptsRequest("run", "triage-prs", input_args=["-"])),
        (
            ["triage-prs", "--repo", "a/b", "n=3", "--help", "--dry"],
            ScriptsRequest("run", "triage-prs", input_args=["--repo", "a/b", "n=3", "--help", "--dry"]),
        ),
        (
            ["save", "triage-prs", "--description", "Label new pull requests.", "--input-schema", SCHEMA_TEXT],
            ScriptsRequest("save", "triage-prs", description="Label new pull requests.", input_schema=SCHEMA),
        ),
        (
            ["save", "triage-prs", f"--input-schema={SCHEMA_TEXT}", "--description=Label them."],
            ScriptsRequest("save", "triage-prs", description="Label them.", input_schema=SCHEMA),
        ),
        (["save", "bare"], ScriptsRequest("save", "bare")),
    ],
)
def test_every_form_of_tools_scripts_parses_to_its_request(args, request_):
    assert parse_scripts_args(args) == request_


def test_run_arguments_are_passed_through_as_a_copy():
    args = ["s", "a=1"]
    request = parse_scripts_args(args)
    args.append("b=2")
    assert request.input_args == ["a=1"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["save"], f"`tools scripts save` needs a name first: {SAVE_FORM}"),
        (["save", "--description", "x"], f"`tools scripts save` needs a name first: {SAVE_FORM}"),
        (["save", "n", "--desc", "x"], f"unexpected '--desc' in `tools scripts save`; write: {SAVE_FORM}"),
        (["save", "n", "extra"], f"unexpected 'extra' in `tools scripts save`; write: {SAVE_FORM}"),
        (["save", "n", "--description"], "--description needs a value, e.g. --description 'Label new pull requests.'"),
        (["save", "n", "--input-schema"], f"--input-schema needs a value, e.g. --input-schema '{SCHEMA_TEXT}'"),
        (
            ["save", "n", "--input-schema", "{type: object}"],
            f"--input-schema is not valid JSON (Expecting property name enclosed in double quotes at column 2); "
            f"write e.g. '{SCHEMA_TEXT}'",
        ),
        (["save", "n", "--input-schema", "[1]"], f"--input-schema must be a JSON object schema, e.g. '{SCHEMA_TEXT}'"),
        (["delete"], "write `tools scripts delete NAME` with exactly one script name"),
        (["delete", "a", "b"], "write `tools scripts delete NAME` with exactly one script name"),
        (["delete", "-x"], "write `tools scripts delete NAME` with exactly one script name"),
        (["list", "x"], "`tools scripts list` takes no arguments; you wrote 'x'"),
        (["--bogus"], f"unexpected '--bogus' after `tools scripts`; write a script name, `save` or `delete`:\n{USAGE}"),
    ],
)
def test_words_that_fit_no_form_get_invalid_input_with_the_right_form(args, message):
    assert _error(args).message == message


def test_saving_without_manage_scripts_is_denied_naming_the_setting():
    with pytest.raises(ToolshellError) as info:
        check_can_save(False)
    assert (info.value.code, info.value.message) == (
        ErrorCode.DENIED,
        "saving scripts needs manage_scripts = true under [tools_in_shell] in the config",
    )


def test_deleting_without_manage_scripts_is_denied_too():
    with pytest.raises(ToolshellError) as info:
        check_can_save(False, "delete")
    assert info.value.message == "deleting scripts needs manage_scripts = true under [tools_in_shell] in the config"


def test_saving_with_manage_scripts_is_allowed():
    check_can_save(True)
    check_can_save(True, "delete")


def test_saved_scripts_may_nest_up_to_four_deep():
    assert MAX_DEPTH == 4
    for depth in range(1, 5):
        check_depth(depth)


def test_a_fifth_level_of_saved_scripts_is_unavailable_and_not_retryable():
    with pytest.raises(ToolshellError) as info:
        check_depth(5)
    assert info.value.code == ErrorCode.UNAVAILABLE
    assert info.value.retryable is False
    assert info.value.message == (
        "saved scripts can call each other up to 4 deep; this call would be depth 5. "
        "Call the inner script from an outer one instead, or merge the scripts"
    )


def _script(name: str, description: str, schema: dict, body: str = "echo hi\n") -> SavedScript:
    return SavedScript(name, description, schema, body, 1.0, 2.0)


def test_list_text_shows_names_descriptions_and_input_keys_aligned():
    scripts = [
        _script("triage-prs", "Label new pull requests.", {**SCHEMA, "properties": {"repo": {}, "limit": {}}}),
        _script("hello", "", {"type": "object"}),
    ]
    assert list_text(scripts) == (
        "triage-prs  Label new pull requests.  (input: repo*, limit)\n"
        "hello       (no description)\n"
        "run one with: tools scripts NAME k=v …   details: tools scripts NAME --help\n"
    )


def test_list_text_with_no_scripts_says_how_to_save_one():
    assert list_text([]) == f"no saved scripts yet; save one with: {SAVE_FORM}\n"


def test_script_help_shows_description_each_input_key_and_the_body():
    schema = {
        "type": "object",
        "properties": {
            "repo": {"type": "string", "description": "owner/name"},
            "state": {"type": "string", "enum": ["open", "closed"], "default": "open"},
            "ids": {"type": ["array", "null"]},
            "raw": {},
        },
        "required": ["repo"],
    }
    body = 'repo=$(jq -r .repo)\ntools github list-pulls repo="$repo"\n'
    assert script_help(_script("triage-prs", "Label new pull requests.", schema, body)) == (
        "tools scripts triage-prs\n"
        "  Label new pull requests.\n"
        "\n"
        "input (key=value, --key value, '{json}' or - for stdin; * = required):\n"
        "  repo*: string — owner/name\n"
        '  state: string; one of "open", "closed"; default "open"\n'
        "  ids: array|null\n"
        "  raw: any\n"
        "\n"
        "script:\n"
        "  repo=$(jq -r .repo)\n"
        '  tools github list-pulls repo="$repo"\n'
    )


def test_script_help_of_a_script_without_properties_says_any_object():
    assert script_help(_script("hello", "", {"type": "object"}, "echo hi")) == (
        "tools scripts hello\n  (no description)\n\ninput: any JSON object (or none)\n\nscript:\n  echo hi\n"
    )
