"""Naming: folding, flat names and their inverse, command words (DESIGN §4 "Names")."""

from __future__ import annotations

import string

from hypothesis import example, given
from hypothesis import strategies as st

from toolshell.registry import ToolEntry
from toolshell.registry.naming import command_text, command_words, flat_name, fold, parse_flat_name

# Server names as config allows them (letters, digits, '-', '_'), within the round-trip limits
# documented in naming.py: non-empty, no '__', not ending with '_'.
servers = st.text(alphabet=string.ascii_letters + string.digits + "-_", min_size=1, max_size=20).filter(
    lambda s: "__" not in s and not s.endswith("_")
)
tools = st.text(min_size=1, max_size=30)


def _flat_shaped(name: str) -> bool:
    head, sep, tail = name.removeprefix("mcp_").partition("__")
    return name.startswith("mcp_") and bool(sep and head and tail)


def test_fold_makes_hyphens_underscores_and_case_interchangeable() -> None:
    assert fold("List-Pulls") == fold("list_pulls") == fold("LIST-PULLS") == "list_pulls"
    assert fold("web-fetch") == "web_fetch"


def test_flat_name_prefixes_mcp_tools_and_keeps_top_level_names_plain() -> None:
    assert flat_name("github", "list_pulls") == "mcp_github__list_pulls"
    assert flat_name(None, "web_fetch") == "web_fetch"


def test_parse_flat_name_splits_at_the_first_double_underscore() -> None:
    assert parse_flat_name("mcp_github__list_pulls") == ("github", "list_pulls")
    assert parse_flat_name("mcp_my-server__a__b") == ("my-server", "a__b")
    assert parse_flat_name("mcp_a___b") == ("a", "_b")


def test_parse_flat_name_reads_names_without_server_and_tool_parts_as_top_level() -> None:
    for name in ["web_fetch", "mcp_", "mcp_x", "mcp___y", "mcp_x__", "mcpx__y"]:
        assert parse_flat_name(name) == (None, name)


def test_a_server_ending_in_underscore_is_outside_the_round_trip_limits() -> None:
    assert parse_flat_name(flat_name("a_", "b")) == ("a", "_b")


@given(servers, tools)
@example("github", "list_pulls")
@example("my-server", "_private")
@example("a", "b__c")
def test_flat_name_round_trips_for_mcp_tools(server: str, tool: str) -> None:
    assert parse_flat_name(flat_name(server, tool)) == (server, tool)


@given(tools.filter(lambda t: not _flat_shaped(t)))
@example("web_fetch")
@example("mcp___y")
@example("mcp_x__")
def test_flat_name_round_trips_for_top_level_tools(tool: str) -> None:
    assert parse_flat_name(flat_name(None, tool)) == (None, tool)


def test_command_words_use_hyphens_and_keep_case_for_display() -> None:
    assert command_words("github", "list_pulls") == ["github", "list-pulls"]
    assert command_words("text_metrics", "textLength") == ["text-metrics", "textLength"]
    assert command_words(None, "web_fetch") == ["web-fetch"]


def test_command_text_names_a_tool_or_a_server_alone() -> None:
    assert command_text("github", "list_pulls") == "tools github list-pulls"
    assert command_text(None, "web_fetch") == "tools web-fetch"
    assert command_text("text_metrics") == "tools text-metrics"


@given(st.one_of(st.none(), servers), tools)
def test_tool_entry_names_agree_with_the_naming_functions(server: str | None, tool: str) -> None:
    entry = ToolEntry(server, tool)
    assert entry.flat_name == flat_name(server, tool)
    assert entry.command == command_text(server, tool)
    assert [fold(w) for w in command_words(server, tool)] == [fold(p) for p in (server, tool) if p]
