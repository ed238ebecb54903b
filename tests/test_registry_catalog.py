"""The catalog: duplicates, lookup of every `tools` form, unknown names with suggestions (DESIGN §4)."""

from __future__ import annotations

import pytest

from toolshell.errors import ErrorCode, ToolshellError
from toolshell.registry import Catalog, Duplicate, Lookup, ServerInfo, ToolEntry

GITHUB = ServerInfo("github", loaded=True, tool_count=3)
DOCS = ServerInfo("docs", loaded=False, tool_count=0, description="Product documentation search")
TEXT = ServerInfo("text_metrics", loaded=True, tool_count=1)
LIST_PULLS = ToolEntry("github", "list_pulls")
GET_PULL = ToolEntry("github", "get_pull")
DELETE_BRANCH = ToolEntry("github", "delete_branch")
TEXT_LENGTH = ToolEntry("text_metrics", "text_length")
WEB_FETCH = ToolEntry(None, "web_fetch")


def _catalog() -> Catalog:
    return Catalog([GITHUB, DOCS, TEXT], [LIST_PULLS, GET_PULL, DELETE_BRANCH, TEXT_LENGTH], [WEB_FETCH])


def _unknown(catalog: Catalog, words: list[str]) -> str:
    with pytest.raises(ToolshellError) as info:
        catalog.lookup(words)
    assert info.value.code == ErrorCode.UNKNOWN_COMMAND
    return info.value.message


# --- lookup forms -----------------------------------------------------------------------------------


def test_server_and_tool_words_name_an_mcp_tool_and_the_rest_is_input() -> None:
    assert _catalog().lookup(["github", "list-pulls", "state=open", "--draft"]) == Lookup(
        "tool", GITHUB, LIST_PULLS, ["state=open", "--draft"]
    )


def test_every_word_is_folded() -> None:
    assert _catalog().lookup(["GitHub", "LIST_PULLS"]) == Lookup("tool", GITHUB, LIST_PULLS, [])
    assert _catalog().lookup(["text_metrics", "text-length"]) == Lookup("tool", TEXT, TEXT_LENGTH, [])


def test_a_top_level_tool_is_one_word() -> None:
    assert _catalog().lookup(["web-fetch", "url=https://example.com"]) == Lookup(
        "tool", None, WEB_FETCH, ["url=https://example.com"]
    )
    assert _catalog().lookup(["WEB_FETCH", "--help"]) == Lookup("tool", None, WEB_FETCH, ["--help"])


def test_a_server_alone_or_followed_by_input_words_is_a_server_lookup() -> None:
    assert _catalog().lookup(["github"]) == Lookup("server", GITHUB, None, [])
    assert _catalog().lookup(["github", "--help"]) == Lookup("server", GITHUB, None, ["--help"])
    assert _catalog().lookup(["github", '{"a":1}']) == Lookup("server", GITHUB, None, ['{"a":1}'])


def test_a_tool_word_after_a_server_is_a_tool_even_before_help() -> None:
    assert _catalog().lookup(["github", "get-pull", "--help"]) == Lookup("tool", GITHUB, GET_PULL, ["--help"])


def test_an_unloaded_server_is_reported_with_every_word_after_it() -> None:
    assert _catalog().lookup(["docs", "search-docs", "q=refunds"]) == Lookup(
        "unloaded_server", DOCS, None, ["search-docs", "q=refunds"]
    )
    assert _catalog().lookup(["Docs"]) == Lookup("unloaded_server", DOCS, None, [])


def test_a_server_that_is_not_ready_and_has_no_tools_is_a_server_lookup_so_its_state_can_be_reported() -> None:
    broken = ServerInfo("broken", loaded=True, tool_count=0, state="failed")
    catalog = Catalog([broken], [])
    assert catalog.lookup(["broken", "status"]) == Lookup("server", broken, None, ["status"])


def test_a_server_name_that_is_also_a_top_level_tool_names_the_server() -> None:
    fetch_server = ServerInfo("fetch", loaded=True, tool_count=1)
    fetch_get = ToolEntry("fetch", "get")
    fetch_tool = ToolEntry(None, "fetch")
    catalog = Catalog([fetch_server], [fetch_get], [fetch_tool])
    assert catalog.lookup(["fetch", "get"]) == Lookup("tool", fetch_server, fetch_get, [])
    assert catalog.lookup(["fetch", "url=x"]) == Lookup("server", fetch_server, None, ["url=x"])
    assert catalog.duplicates == [Duplicate("tool_vs_server", "tools fetch", "fetch", "fetch")]
    assert catalog.duplicate_notes() == [
        "the tool 'fetch' has the same name as server 'fetch'; `tools fetch` names the server, so 'fetch' cannot "
        "be called from the shell; rename the server to reach it."
    ]
    assert catalog.by_flat_name("fetch") is fetch_tool


# --- unknown names ------------------------------------------------------------------------------------


def test_an_unknown_first_word_suggests_the_nearest_commands() -> None:
    assert _unknown(_catalog(), ["gthub", "list-pulls"]) == (
        "no tool or server named 'gthub'; did you mean: tools github list-pulls, tools github, "
        "tools github get-pull? Run `tools --help` for the list."
    )


def test_a_tool_named_without_its_server_suggests_the_full_command() -> None:
    assert _unknown(_catalog(), ["list-pulls"]) == (
        "no tool or server named 'list-pulls'; did you mean: tools github list-pulls, tools github get-pull? "
        "Run `tools --help` for the list."
    )


def test_near_server_and_top_level_names_are_suggested() -> None:
    assert _unknown(_catalog(), ["web-fech", "url=x"]) == (
        "no tool or server named 'web-fech'; did you mean: tools web-fetch? Run `tools --help` for the list."
    )
    assert _unknown(_catalog(), ["doc"]) == (
        "no tool or server named 'doc'; did you mean: tools docs? Run `tools --help` for the list."
    )


def test_an_unknown_name_with_nothing_near_points_to_help() -> None:
    message = _unknown(_catalog(), ["zzz"])
    assert message == "no tool or server named 'zzz'. Run `tools --help` for the list."


def test_an_unknown_tool_of_a_server_names_the_servers_nearest_tools_and_its_help() -> None:
    assert _unknown(_catalog(), ["github", "list-pull", "state=open"]) == (
        "server 'github' has no tool named 'list-pull'; did you mean: tools github list-pulls, "
        "tools github get-pull? Run `tools github --help` for its tools."
    )
    assert _unknown(_catalog(), ["text_metrics", "zzz"]) == (
        "server 'text_metrics' has no tool named 'zzz'. Run `tools text-metrics --help` for its tools."
    )


def test_suggestions_are_also_returned_as_data() -> None:
    with pytest.raises(ToolshellError) as info:
        _catalog().lookup(["web-fech"])
    assert info.value.detail == {"suggestions": ["tools web-fetch"]}


def test_no_words_at_all_asks_for_a_name() -> None:
    assert _unknown(_catalog(), []) == "name a server or a tool; run `tools --help` for the list."


# --- duplicates -------------------------------------------------------------------------------------


def test_two_tools_that_fold_alike_keep_the_first_and_say_so() -> None:
    first, second = ToolEntry("github", "list_pulls", "first"), ToolEntry("github", "List-Pulls", "second")
    catalog = Catalog([GITHUB], [first, second])
    assert catalog.lookup(["github", "list-pulls"]).entry is first
    assert catalog.entries == [first]
    assert catalog.duplicates == [
        Duplicate("tool", "tools github list-pulls", "mcp_github__list_pulls", "mcp_github__List-Pulls")
    ]
    assert catalog.duplicate_notes() == [
        "`tools github list-pulls` matches two tools once hyphens, underscores and case are ignored: "
        "mcp_github__list_pulls and mcp_github__List-Pulls; mcp_github__list_pulls (configured first) is called "
        "and mcp_github__List-Pulls cannot be."
    ]


def test_servers_whose_names_fold_alike_keep_the_first_configured_whatever_the_entry_order() -> None:
    first, second = ServerInfo("my-git", True, 1), ServerInfo("my_git", True, 2)
    first_status, second_status, second_log = (
        ToolEntry("my-git", "status"),
        ToolEntry("my_git", "status"),
        ToolEntry("my_git", "log"),
    )
    catalog = Catalog([first, second], [second_status, second_log, first_status])
    assert catalog.lookup(["my_git", "status"]) == Lookup("tool", first, first_status, [])
    assert catalog.entries == [first_status]
    assert catalog.server_entries("my_git") == [first_status]
    assert catalog.duplicate_notes() == [
        "servers 'my-git' and 'my_git' have the same name once hyphens, underscores and case are ignored; "
        "`tools my-git` is 'my-git' (configured first) and the tools of 'my_git' cannot be called; rename one of them."
    ]


def test_a_flat_name_collision_across_servers_keeps_the_first_configured_server() -> None:
    a, a_ = ServerInfo("a", True, 1), ServerInfo("a_", True, 1)
    first, second = ToolEntry("a", "_b"), ToolEntry("a_", "b")  # both are mcp_a___b
    catalog = Catalog([a, a_], [second, first])
    assert catalog.by_flat_name("mcp_a___b") is first
    assert catalog.duplicates == [Duplicate("tool", "tools a -b", "mcp_a___b", "mcp_a___b")]


def test_an_entry_of_a_server_that_is_not_listed_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="names server 'nope'"):
        Catalog([GITHUB], [ToolEntry("nope", "x")])


# --- views ------------------------------------------------------------------------------------------


def test_views_list_callable_tools_and_look_them_up_folded() -> None:
    catalog = _catalog()
    assert catalog.servers == [GITHUB, DOCS, TEXT]
    assert catalog.entries == [LIST_PULLS, GET_PULL, DELETE_BRANCH, TEXT_LENGTH]
    assert catalog.top_level == [WEB_FETCH]
    assert catalog.server_entries("GitHub") == [LIST_PULLS, GET_PULL, DELETE_BRANCH]
    assert catalog.server_entries("docs") == []
    assert catalog.entry_for("text-metrics", "Text-Length") is TEXT_LENGTH
    assert catalog.entry_for(None, "web-fetch") is WEB_FETCH
    assert catalog.entry_for("github", "nope") is None
    assert catalog.by_flat_name("mcp_github__get-pull") is GET_PULL
    assert catalog.by_flat_name("web-fetch") is WEB_FETCH
    assert catalog.by_flat_name("mcp_github__nope") is None
    assert catalog.duplicates == []


# --- flat names ---------------------------------------------------------------------------------------


def test_a_flat_name_names_its_tool_and_the_rest_is_input() -> None:
    assert _catalog().lookup(["mcp_github__get_pull", "number=7"]) == Lookup("tool", GITHUB, GET_PULL, ["number=7"])


def test_a_flat_name_is_folded_like_every_word() -> None:
    assert _catalog().lookup(["MCP_GitHub__Get-Pull"]) == Lookup("tool", GITHUB, GET_PULL, [])
    assert _catalog().lookup(["mcp-text-metrics--text-length"]) == Lookup("tool", TEXT, TEXT_LENGTH, [])


def test_a_flat_name_reaches_the_tools_of_a_server_named_like_a_verb() -> None:
    search = ServerInfo("search", loaded=True, tool_count=1)
    find = ToolEntry("search", "find")
    assert Catalog([search], [find]).lookup(["mcp_search__find", "q=x"]) == Lookup("tool", search, find, ["q=x"])


def test_a_flat_name_of_an_unloaded_server_asks_for_the_server_to_be_loaded() -> None:
    assert _catalog().lookup(["mcp_docs__search_docs", "q=refunds"]) == Lookup(
        "unloaded_server", DOCS, None, ["q=refunds"]
    )


def test_a_flat_name_of_a_server_that_is_not_ready_is_a_server_lookup() -> None:
    broken = ServerInfo("broken", loaded=True, tool_count=0, state="failed")
    assert Catalog([broken], []).lookup(["mcp_broken__any"]) == Lookup("server", broken, None, [])


def test_a_flat_name_with_an_unknown_tool_suggests_the_servers_nearest_tools() -> None:
    assert _unknown(_catalog(), ["mcp_github__Get-Pul"]) == (
        "server 'github' has no tool named 'Get-Pul'; did you mean: tools github get-pull, tools github list-pulls? "
        "Run `tools github --help` for its tools."
    )


def test_a_flat_name_with_a_misspelt_server_suggests_the_nearest_tools() -> None:
    assert _unknown(_catalog(), ["mcp_gthub__get_pull"]) == (
        "no tool or server named 'mcp_gthub__get_pull'; did you mean: tools github get-pull, "
        "tools github list-pulls? Run `tools --help` for the list."
    )


def test_the_first_word_as_a_server_or_top_level_tool_wins_over_a_flat_name() -> None:
    odd = ServerInfo("mcp_github__get_pull", loaded=True, tool_count=1)
    odd_tool = ToolEntry("mcp_github__get_pull", "run")
    catalog = Catalog([GITHUB, odd], [GET_PULL, odd_tool])
    assert catalog.lookup(["mcp_github__get_pull", "run"]) == Lookup("tool", odd, odd_tool, [])
