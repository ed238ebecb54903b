"""Input building (DESIGN §4 "Input"): every rule, with the exact objects and messages."""

from __future__ import annotations

from typing import Any

import pytest

from toolshell.command import build_input
from toolshell.command.inputs import MAX_DEPTH
from toolshell.errors import ErrorCode, ToolshellError

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "repo": {"type": "string"},
        "number": {"type": "integer"},
        "state": {"type": "string", "enum": ["open", "closed"]},
        "labels": {"type": "array", "items": {"type": "string"}},
        "draft": {"type": "boolean"},
        "repoName": {"type": "string"},
        "title": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "code": {"enum": ["404", "500"]},
        "kind": {"type": ["string", "null"]},
    },
}


def invalid(args: list[str], stdin: str | None = None, schema: dict[str, Any] = SCHEMA) -> str:
    with pytest.raises(ToolshellError) as err:
        build_input(args, stdin, schema)
    assert err.value.code == ErrorCode.INVALID_INPUT
    return err.value.message


def test_stdin_json_with_no_arguments_is_the_input() -> None:
    # jq -n '{repo: "a/b"}' | tools github list-pulls
    assert build_input([], '{"repo": "a/b"}\n', SCHEMA) == {"repo": "a/b"}


def test_no_arguments_and_no_stdin_is_an_empty_object() -> None:
    assert build_input([], None, SCHEMA) == {}
    assert build_input([], "", SCHEMA) == {}
    assert build_input([], " \n\t", SCHEMA) == {}


def test_dash_reads_stdin() -> None:
    assert build_input(["-"], '{"repo": "a/b", "number": 3}', SCHEMA) == {"repo": "a/b", "number": 3}


def test_dash_with_pairs_reads_stdin_and_pairs_win() -> None:
    assert build_input(["-", "number=9"], '{"repo": "a/b", "number": 3}', SCHEMA) == {"repo": "a/b", "number": 9}


def test_string_property_keeps_a_number_looking_value_as_text() -> None:
    assert build_input(["repo=42"], None, SCHEMA) == {"repo": "42"}


def test_non_string_property_value_is_read_as_json() -> None:
    assert build_input(["number=7"], None, SCHEMA) == {"number": 7}
    assert build_input(['labels=["a","b"]'], None, SCHEMA) == {"labels": ["a", "b"]}
    assert build_input(["draft=false"], None, SCHEMA) == {"draft": False}


def test_value_that_is_not_json_stays_text() -> None:
    assert build_input(["labels=bug"], None, SCHEMA) == {"labels": "bug"}
    assert build_input(["unknown=hello world"], None, SCHEMA) == {"unknown": "hello world"}


def test_unknown_key_value_is_read_as_json() -> None:
    assert build_input(["limit=5", 'filter={"a":1}'], None, SCHEMA) == {"limit": 5, "filter": {"a": 1}}


def test_nan_and_infinity_are_not_json_so_they_stay_text() -> None:
    assert build_input(["number=NaN", "limit=Infinity"], None, SCHEMA) == {"number": "NaN", "limit": "Infinity"}


def test_optional_string_enum_of_strings_and_type_list_with_string_keep_text() -> None:
    args = ["title=123", "code=404", "kind=null"]
    assert build_input(args, None, SCHEMA) == {"title": "123", "code": "404", "kind": "null"}


def test_value_may_contain_equals_signs() -> None:
    assert build_input(["repo=a=b"], None, SCHEMA) == {"repo": "a=b"}


def test_flag_alone_is_true() -> None:
    assert build_input(["--draft"], None, SCHEMA) == {"draft": True}


def test_flag_followed_by_another_flag_is_true() -> None:
    assert build_input(["--draft", "--number", "4"], None, SCHEMA) == {"draft": True, "number": 4}


def test_key_value_flag_takes_the_next_word() -> None:
    assert build_input(["--repo", "acme/api", "--number", "12"], None, SCHEMA) == {"repo": "acme/api", "number": 12}


def test_flag_value_may_start_with_a_single_dash() -> None:
    assert build_input(["--repo", "-x", "--number", "-1"], None, SCHEMA) == {"repo": "-x", "number": -1}


def test_flag_with_equals_is_accepted() -> None:
    assert build_input(["--repo=acme/api", "--number=3"], None, SCHEMA) == {"repo": "acme/api", "number": 3}


def test_flag_with_equals_keeps_an_empty_value() -> None:
    assert build_input(["--repo="], None, SCHEMA) == {"repo": ""}


def test_json_argument_is_the_input() -> None:
    assert build_input(['{"repo":"acme/api","state":"open"}'], None, SCHEMA) == {"repo": "acme/api", "state": "open"}


def test_pairs_merge_over_the_json_argument() -> None:
    args = ['{"repo":"acme/api","number":1}', "number=2"]
    assert build_input(args, None, SCHEMA) == {"repo": "acme/api", "number": 2}


def test_precedence_is_stdin_then_json_argument_then_pairs() -> None:
    stdin = '{"repo": "from-stdin", "number": 1, "state": "open", "draft": true}'
    args = ["-", '{"number": 2, "state": "closed"}', "state=open", "--labels", '["x"]']
    assert build_input(args, stdin, SCHEMA) == {
        "repo": "from-stdin",
        "number": 2,
        "state": "open",
        "draft": True,
        "labels": ["x"],
    }


def test_later_pairs_win_over_earlier_ones() -> None:
    assert build_input(["number=1", "--number", "2", "number=3"], None, SCHEMA) == {"number": 3}


def test_stdin_is_ignored_when_only_pairs_are_given() -> None:
    # … | while read n; do tools github get-pull repo=acme/api number=$n; done
    assert build_input(["repo=acme/api", "number=5"], "6\n7\n", SCHEMA) == {"repo": "acme/api", "number": 5}


def test_stdin_is_ignored_when_only_a_json_argument_is_given() -> None:
    assert build_input(['{"number": 1}'], "not json", SCHEMA) == {"number": 1}


@pytest.mark.parametrize("spelling", ["--repo-name", "--repo_name", "--reponame", "--RepoName"])
def test_flag_spellings_resolve_to_the_schema_property(spelling: str) -> None:
    assert build_input([spelling, "x"], None, SCHEMA) == {"repoName": "x"}


@pytest.mark.parametrize("spelling", ["repo_name", "repo-name", "repoName", "REPO_NAME"])
def test_pair_spellings_resolve_to_the_schema_property(spelling: str) -> None:
    assert build_input([f"{spelling}=42"], None, SCHEMA) == {"repoName": "42"}


def test_key_without_a_matching_property_is_kept_as_written() -> None:
    assert build_input(["--page-size", "10"], None, SCHEMA) == {"page-size": 10}


def test_an_exact_property_name_wins_over_a_folded_one() -> None:
    schema = {"properties": {"repo_name": {"type": "string"}, "repoName": {"type": "integer"}}}
    assert build_input(["repoName=5", "repo_name=5"], None, schema) == {"repoName": 5, "repo_name": "5"}


def test_a_schema_without_properties_reads_every_value_as_json() -> None:
    assert build_input(["a=1", "b=x"], None, {}) == {"a": 1, "b": "x"}


def test_dash_with_empty_stdin_says_how_to_pipe_input() -> None:
    expected = (
        "`-` reads the input from stdin, but stdin is empty; pipe a JSON object in, "
        "e.g. `jq -n '{repo: \"a/b\"}' | tools github list-pulls -`"
    )
    assert invalid(["-"], "") == expected
    assert invalid(["-"], None) == expected
    assert invalid(["-", "number=1"], "  \n") == expected


def test_non_object_stdin_names_what_was_received() -> None:
    assert invalid([], "[1, 2]") == (
        "stdin holds an array, not a JSON object: [1, 2]; pipe one object, "
        "e.g. `jq -n '{repo: \"a/b\"}' | tools github list-pulls`"
    )
    assert invalid(["-"], '"acme/api"') == (
        'stdin holds a string, not a JSON object: "acme/api"; pipe one object, '
        "e.g. `jq -n '{repo: \"a/b\"}' | tools github list-pulls`"
    )


def test_non_object_json_argument_names_what_was_received() -> None:
    assert invalid(['["a", "b"]']) == (
        'the JSON argument is an array, not an object: ["a", "b"]; pass one object, '
        'e.g. \'{"repo": "a/b"}\', or key=value pairs'
    )


def test_long_received_values_are_shortened_in_the_message() -> None:
    message = invalid([], "[" + ", ".join(["1"] * 50) + "]")
    assert message.startswith("stdin holds an array, not a JSON object: [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,")
    assert "…; pipe one object" in message


def test_stray_word_shows_the_input_forms() -> None:
    assert invalid(["repo=a/b", "foo"]) == (
        "unexpected argument 'foo'; pass input as key=value, --key value, or a JSON object"
    )


@pytest.mark.parametrize("word", ["42", "-v", "--", "---x", "--=1", "=x", "https://x.io/?a=b", ""])
def test_other_stray_words_are_rejected(word: str) -> None:
    assert invalid([word]) == (f"unexpected argument {word!r}; pass input as key=value, --key value, or a JSON object")


def test_keys_may_be_written_in_any_script() -> None:
    schema = {"type": "object", "properties": {"ключ": {"type": "integer"}, "名前": {"type": "string"}}}
    assert build_input(["ключ=1", "--名前", "42", "--über.größe=x"], None, schema) == {
        "ключ": 1,
        "名前": "42",
        "über.größe": "x",
    }


@pytest.mark.parametrize("word", ["ключ=1", "_k-1.v=1"])
def test_a_non_ascii_or_punctuated_key_is_a_pair_not_a_stray_word(word: str) -> None:
    key = word.split("=", 1)[0]
    assert build_input([word], None, {}) == {key: 1}


@pytest.mark.parametrize("word", ["1ключ=1", ".k=1", "к лю=1", "ключ!=1"])
def test_a_key_that_is_not_a_name_is_still_a_stray_word(word: str) -> None:
    assert invalid([word]) == (f"unexpected argument {word!r}; pass input as key=value, --key value, or a JSON object")


def test_bad_json_argument_reports_the_decoder_position() -> None:
    assert invalid(['{"repo": "a/b" "number": 1}']) == (
        "the JSON argument is not valid JSON (Expecting ',' delimiter: line 1 column 16 (char 15)); "
        'write one object in single quotes, e.g. \'{"repo": "a/b"}\''
    )


def test_bad_stdin_json_reports_the_decoder_position_and_the_pairs_alternative() -> None:
    assert invalid([], "7\n8\n") == (
        "stdin is not valid JSON (Extra data: line 2 column 1 (char 2)); pipe one JSON object, "
        "or pass the input as key=value pairs (stdin is then left alone); a call with no input reads stdin, "
        "so inside a `while read` loop pass '{}'"
    )


def test_nan_inside_json_is_rejected() -> None:
    assert invalid(['{"number": NaN}']) == (
        "the JSON argument is not valid JSON (NaN is not valid JSON); "
        'write one object in single quotes, e.g. \'{"repo": "a/b"}\''
    )


def _files(files: dict[str, str]) -> Any:
    def read(path: str) -> str:
        if path not in files:
            raise ValueError("it cannot be read (file not found)")
        return files[path]

    return read


def test_a_value_at_a_path_is_that_files_content_exactly_in_every_pair_form() -> None:
    read = _files({"note.txt": "two lines\n\n", "n.json": "7\n", "labels.json": '["a", "b"]'})
    args = ["repo=@note.txt", "--title=@note.txt", "--kind", "@note.txt", "number=@n.json", "labels=@labels.json"]
    assert build_input(args, None, SCHEMA, read) == {
        "repo": "two lines\n\n",  # a string key: the text as is, trailing newlines kept
        "title": "two lines\n\n",
        "kind": "two lines\n\n",
        "number": 7,  # else JSON, as a pair's value always is
        "labels": ["a", "b"],
    }


def test_a_backslash_before_a_leading_at_sign_sends_the_text_and_only_one_is_dropped() -> None:
    read = _files({})
    assert build_input(["repo=\\@acme/api", "title=\\\\@x", "kind=a@b"], None, SCHEMA, read) == {
        "repo": "@acme/api",
        "title": "\\@x",
        "kind": "a@b",
    }


def test_a_file_that_cannot_be_read_is_invalid_input_naming_the_escape() -> None:
    with pytest.raises(ToolshellError) as err:
        build_input(["repo=@missing.txt"], None, SCHEMA, _files({}))
    assert err.value.message == (
        "repo=@missing.txt reads a file of the shell, but it cannot be read (file not found); "
        "to send text that starts with @, write 'repo=\\@missing.txt'"
    )


def test_without_a_reader_a_file_value_is_left_to_run_time() -> None:
    assert invalid(["repo=@note.txt"]) == "key=@file is read while the script runs"
    assert invalid(["repo=@"]).startswith("repo=@ names no file")


def test_json_nested_past_max_depth_is_invalid_input_on_every_python_and_max_depth_itself_is_taken() -> None:
    # Python 3.13's parser takes 5,000 levels where 3.11 and 3.12 stopped near 1,000: the bound is ours.
    def nested(levels: int) -> str:
        return '{"a":' * (levels - 1) + "{}" + "}" * (levels - 1)

    assert build_input([nested(MAX_DEPTH)], None, {})["a"] is not None
    for levels in (MAX_DEPTH + 1, 5000):
        with pytest.raises(ToolshellError) as raised:
            build_input([nested(levels)], None, {})
        assert raised.value.code == ErrorCode.INVALID_INPUT and "more than 100 levels" in raised.value.message
        with pytest.raises(ToolshellError) as from_stdin:
            build_input([], nested(levels), {})
        assert from_stdin.value.code == ErrorCode.INVALID_INPUT
