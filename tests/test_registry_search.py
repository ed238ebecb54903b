"""`tools search`: BM25 ranking by name, server, description and parameters; lazy servers (DESIGN §4)."""

from __future__ import annotations

from typing import Any

from toolshell.registry import Catalog, ServerInfo, ToolEntry
from toolshell.registry.search import SearchIndex, tokenize


def _schema(**params: str) -> dict[str, Any]:
    return {"type": "object", "properties": {name: {"type": "string", "description": d} for name, d in params.items()}}


def _names(hits: list[Any]) -> list[str]:
    return [h.entry.flat_name for h in hits]


def test_tokenize_splits_on_punctuation_and_camel_case_lower_cases_and_folds_plurals() -> None:
    assert tokenize("listPulls get_pull HTTPServer v2 the-class") == [
        "list", "pull", "get", "pull", "http", "server", "v", "2", "the", "class"
    ]  # fmt: skip


def test_a_query_word_in_the_name_beats_the_same_word_in_a_description() -> None:
    # Same words, swapped between name and description: only the field weights tell them apart.
    in_description = ToolEntry("a", "forecast_now", "weather for a city")
    in_name = ToolEntry("b", "weather_now", "forecast for a city")
    hits = SearchIndex([in_description, in_name]).search("weather")
    assert _names(hits) == ["mcp_b__weather_now", "mcp_a__forecast_now"]


def test_parameter_names_are_searched() -> None:
    with_branch = ToolEntry("git", "checkout", "Switch the working tree.", _schema(branch="Where to go"))
    other = ToolEntry("git", "status", "Show the working tree status.", _schema(path="Limit to a path"))
    assert _names(SearchIndex([other, with_branch]).search("branch")) == ["mcp_git__checkout"]


def test_a_parameter_name_weighs_more_than_a_parameter_description() -> None:
    named = ToolEntry("s", "one", "", _schema(label="Text to show"))
    described = ToolEntry("s", "two", "", _schema(text="The label text"))
    assert _names(SearchIndex([described, named]).search("label")) == ["mcp_s__one", "mcp_s__two"]


def test_nested_parameters_are_searched() -> None:
    nested = {"type": "object", "properties": {"filter": {"type": "array", "items": _schema(assignee="who")}}}
    entry = ToolEntry("tracker", "find", "Find issues.", nested)
    assert _names(SearchIndex([ToolEntry("x", "y"), entry]).search("assignee")) == ["mcp_tracker__find"]


def test_a_server_name_matches_that_servers_tools() -> None:
    entries = [ToolEntry("github", "list_pulls", "List pull requests."), ToolEntry("gitlab", "list_merge_requests")]
    catalog = Catalog([ServerInfo("github", True, 1), ServerInfo("gitlab", True, 1)], entries)
    assert _names(catalog.search("github")) == ["mcp_github__list_pulls"]


def test_camel_case_and_plural_query_words_meet_snake_case_names() -> None:
    entries = [ToolEntry("github", "list_pulls"), ToolEntry("github", "get_issue")]
    catalog = Catalog([ServerInfo("github", True, 2)], entries)
    assert _names(catalog.search("listPull")) == ["mcp_github__list_pulls"]


def test_search_covers_top_level_tools_and_honours_the_limit() -> None:
    entries = [ToolEntry("s", f"fetch_{i}") for i in range(5)]
    catalog = Catalog([ServerInfo("s", True, 5)], entries, [ToolEntry(None, "web_fetch", "Fetch a URL.")])
    hits = catalog.search("fetch url", limit=3)
    assert _names(hits) == ["web_fetch", "mcp_s__fetch_0", "mcp_s__fetch_1"]
    assert hits[0].score > hits[1].score == hits[2].score


def test_a_query_that_matches_nothing_finds_nothing() -> None:
    catalog = Catalog([ServerInfo("s", True, 1)], [ToolEntry("s", "a", "b")])
    assert catalog.search("zebra") == []
    assert catalog.search("") == []


def test_duplicate_losers_are_not_found() -> None:
    catalog = Catalog([ServerInfo("s", True, 2)], [ToolEntry("s", "get_x", "first"), ToolEntry("s", "get-x", "second")])
    assert [h.entry.description for h in catalog.search("get")] == ["first"]


def test_unloaded_servers_match_a_query_by_name_or_description() -> None:
    servers = [
        ServerInfo("docs", False, 0, description="Product documentation"),
        ServerInfo("billing_api", False, 0, description="Invoices and refunds"),
        ServerInfo("github", True, 0, description="Pull requests"),
    ]
    catalog = Catalog(servers, [])
    assert catalog.unloaded_servers_matching("search docs for refunds") == ["docs", "billing_api"]
    assert catalog.unloaded_servers_matching("billing") == ["billing_api"]
    assert catalog.unloaded_servers_matching("pull requests") == []
