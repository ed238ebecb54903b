"""`tools` argv classification: verbs before any catalog lookup."""

from __future__ import annotations

import pytest

from toolshell.command import Help, Invoke, Plan, Scripts, Search, parse
from toolshell.errors import ErrorCode, ToolshellError


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], Help([])),
        (["--help"], Help([])),
        (["-h"], Help([])),
        (["help"], Help([])),
        (["help", "github"], Help(["github"])),
        (["github", "--help"], Help(["github"])),
        (["github", "-h"], Help(["github"])),
        (["web-fetch", "--help"], Help(["web-fetch"])),
        (["github", "list-pulls", "--help"], Help(["github", "list-pulls"])),
        (["github", "list-pulls", "repo=a/b", "--help"], Help(["github", "list-pulls"])),
        (["github", "list-pulls", "--state", "--help"], Help(["github", "list-pulls"])),
    ],
)
def test_help_requests_name_the_words_before_help(argv: list[str], expected: Help) -> None:
    assert parse(argv) == expected


def test_dash_h_after_a_bare_flag_is_that_flags_value_not_help() -> None:
    assert parse(["github", "create-issue", "--title", "-h"]) == Invoke(["github", "create-issue", "--title", "-h"])


def test_search_joins_its_words() -> None:
    assert parse(["search", "pull", " request "]) == Search("pull request")


def test_search_without_words_shows_the_right_form() -> None:
    with pytest.raises(ToolshellError) as err:
        parse(["search"])
    assert err.value.code == ErrorCode.INVALID_INPUT
    assert err.value.message == (
        "tools search needs words to look for: tools search <words>, e.g. tools search pull request"
    )


def test_search_with_only_blank_words_is_rejected_like_no_words() -> None:
    with pytest.raises(ToolshellError) as err:
        parse(["search", " ", ""])
    assert err.value.code == ErrorCode.INVALID_INPUT


def test_search_help_asks_for_the_verbs_help() -> None:
    assert parse(["search", "--help"]) == Help(["search"])
    assert parse(["search", "pulls", "-h"]) == Help(["search"])


def test_plan_takes_the_script_on_stdin() -> None:
    assert parse(["plan"]) == Plan()
    assert parse(["plan", "--help"]) == Help(["plan"])


def test_plan_with_arguments_says_to_use_stdin() -> None:
    with pytest.raises(ToolshellError) as err:
        parse(["plan", "script.sh"])
    assert err.value.code == ErrorCode.INVALID_INPUT
    assert err.value.message == (
        "tools plan takes no arguments (got 'script.sh'); pass the script on stdin: tools plan <<'EOF' … EOF"
    )


def test_scripts_passes_everything_on_including_help() -> None:
    assert parse(["scripts"]) == Scripts([])
    assert parse(["scripts", "triage-prs", "repo=a/b"]) == Scripts(["triage-prs", "repo=a/b"])
    assert parse(["scripts", "triage-prs", "--help"]) == Scripts(["triage-prs", "--help"])


def test_verbs_win_over_a_server_of_the_same_name() -> None:
    assert parse(["search", "list-things"]) == Search("list-things")
    assert parse(["scripts", "list"]) == Scripts(["list"])


def test_anything_else_is_a_call_left_whole_for_the_catalog() -> None:
    argv = ["github", "get-pull", "repo=acme/api", "number=7"]
    assert parse(argv) == Invoke(argv)
    assert parse(["web-fetch", '{"url":"https://x"}']) == Invoke(["web-fetch", '{"url":"https://x"}'])


def test_a_help_value_inside_a_pair_is_not_help() -> None:
    assert parse(["github", "search-code", "query=--help"]) == Invoke(["github", "search-code", "query=--help"])
