"""Help and search text, asserted whole against a fake catalog."""

from __future__ import annotations

from typing import Any

import pytest

from _command_support import ADD_LABELS, DELETE_BRANCH, LIST_PULLS, WEB_FETCH, FakeCatalog, FakeHit, catalog
from toolshell.command import search_text, server_help, tool_help, top_help, verb_help
from toolshell.errors import ErrorCode, ToolshellError
from toolshell.registry.entry import ServerInfo, ToolEntry

USAGE = """\
Usage:
  tools <server> --help | tools [<server>] <tool> --help | tools search <words> | tools plan < script
  tools [<server>] <tool> key=value --key value '{"key":"json"}'  (or a JSON object on stdin, or -)
  Values are JSON unless the key is a string (number=7 is 7, repo=42 stays "42"); --flag alone is true.
  key=@file sends a shell file exactly ("$(…)" drops trailing newlines); 'key=\\@x' is the text @x.
  Prints text as is, else JSON. On failure: exit 1, stderr {"error":{"code":"…","message":"…","retryable":…}}
  Calls run at once with & and wait: tools a x > a.json & tools b y > b.json & wait
"""

EXACT = (
    'Exact text: key=@file sends a file of the shell byte for byte; key="$(cat file)" drops its trailing '
    "newlines. 'key=\\@x' is the text @x."
)


def test_top_help_lists_servers_other_tools_usage_and_notes() -> None:
    assert top_help(catalog()) == (
        "MCP servers (tools <server> --help lists its tools):\n"
        "  github     3 tools  GitHub repositories, issues and pull requests.\n"
        "  docs       (not loaded)\n"
        "  time-zone  1 tool (failed)\n"
        "Other tools (tools <tool> --help shows its input):\n"
        "  web-fetch  [read-only] Fetch a URL and return its text.\n"
    ) + USAGE + (
        "Notes:\n  tools github list-pulls: github and gh_enterprise both have it; github wins (configured first)\n"
    )


def test_top_help_with_nothing_configured_still_shows_usage() -> None:
    assert top_help(FakeCatalog(servers=[])) == "No tools are available.\n" + USAGE


def test_top_help_leaves_out_empty_sections() -> None:
    only_top = FakeCatalog(servers=[], top_level=[WEB_FETCH])
    assert top_help(only_top) == (
        "Other tools (tools <tool> --help shows its input):\n"
        "  web-fetch  [read-only] Fetch a URL and return its text.\n" + USAGE
    )


def test_server_help_lists_each_tool_with_its_arguments_markers_and_first_sentence() -> None:
    assert server_help(catalog(), "github") == (
        "tools github <tool>: 3 tools\n"
        "GitHub repositories, issues and pull requests.\n"
        "  list-pulls     repo=<string> [state=<open|closed|all>] [per_page=<integer>]  [read-only] List pull "
        "requests in a repository.\n"
        "  delete-branch  repo=<string> branch=<string>  [destructive] Delete a branch!\n"
        "  add-labels     repo=<string> number=<integer> labels=<array of string>  Add labels to an issue or pull "
        "request\n"
        "key=<type> is required, [key=<type>] optional; key=@file sends a file's exact bytes. "
        "More on one tool: tools github <tool> --help\n"
    )


def test_a_servers_help_line_is_bounded_however_many_arguments_a_tool_takes() -> None:
    props = {f"argument_with_a_rather_long_name_{n:02d}": {"type": "string"} for n in range(30)}
    props["nested"] = {"type": "object", "properties": {f"f{n}": {"type": "string"} for n in range(12)}}
    wide = ToolEntry("wide", "many", "Takes many.", {"type": "object", "properties": props, "required": ["nested"]})
    text = server_help(FakeCatalog([ServerInfo("wide", loaded=True, tool_count=1)], {"wide": [wide]}), "wide")
    line = text.splitlines()[1]
    assert line.startswith(
        "  many  nested=<{f0?,f1?,f2?,f3?,f4?,f5?,f6?,f7?,+4 more}> [argument_with_a_rather_long_nam…=<string>] "
    )
    assert line.endswith(" +23 more  Takes many.") and len(line) < 400


def test_server_help_matches_hyphen_and_underscore_spellings_and_shows_state() -> None:
    assert server_help(catalog(), "time-zone") == "tools time-zone <tool>: 0 tools (failed)\n"


def test_server_help_for_an_unknown_server_names_the_known_ones() -> None:
    with pytest.raises(ToolshellError) as err:
        server_help(catalog(), "gitlab")
    assert err.value.code == ErrorCode.UNKNOWN_COMMAND
    assert err.value.message == "no MCP server named 'gitlab' (servers: github, docs, time_zone); see tools --help"


def test_tool_help_shows_description_schema_and_example() -> None:
    assert tool_help(LIST_PULLS) == (
        "tools github list-pulls  [read-only]\n"
        "List pull requests in a repository. Sorted by number.\n"
        "Input:\n"
        "  repo      string   (required)  Owner and name, e.g. acme/api.\n"
        '  state     string   (one of: "open", "closed", "all"; default: "open")\n'
        "  per_page  integer  Page size, at most 100. (default: 30)\n"
        f"{EXACT}\n"
        "Example: tools github list-pulls repo=<string>\n"
    )


def test_tool_help_example_passes_every_required_property() -> None:
    assert tool_help(ADD_LABELS) == (
        "tools github add-labels\n"
        "Add labels to an issue or pull request\n"
        "Input:\n"
        "  repo    string           (required)\n"
        "  number  integer          (required)\n"
        "  labels  array of string  (required)\n"
        f"{EXACT}\n"
        "Example: tools github add-labels repo=<string> number=<integer> labels='[…]'\n"
    )
    assert tool_help(DELETE_BRANCH).endswith("Example: tools github delete-branch repo=<string> branch=<string>\n")


def test_tool_help_for_a_top_level_tool_keeps_the_whole_description() -> None:
    assert tool_help(WEB_FETCH) == (
        "tools web-fetch  [read-only]\n"
        "Fetch a URL and return its text.\n"
        "Follows redirects.\n"
        "Input:\n"
        "  url  string  (required)\n"
        f"{EXACT}\n"
        "Example: tools web-fetch url=<string>\n"
    )


def test_tool_help_says_how_to_send_a_file_exactly_only_when_the_tool_takes_text() -> None:
    number = ToolEntry("calc", "square", "", {"type": "object", "properties": {"n": {"type": "integer"}}})
    assert "Exact text" not in tool_help(number)
    assert EXACT in tool_help(DELETE_BRANCH)


def test_tool_help_for_a_tool_without_input() -> None:
    entry = ToolEntry("time", "now", "")
    assert tool_help(entry) == "tools time now\nInput: none\nExample: tools time now\n"


NESTED: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "What to find."},
        "filter": {"$ref": "#/$defs/Filter", "description": "Narrow the results."},
        "sort": {"anyOf": [{"type": "string", "enum": ["new", "old"]}, {"type": "null"}], "default": None},
        "events": {
            "type": "array",
            "items": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        },
        "verbose": {"type": "boolean"},
        "mode": {"const": "fast"},
        "extra": {},
    },
    "required": ["query", "filter", "verbose", "mode", "events"],
    "$defs": {
        "Filter": {
            "type": "object",
            "properties": {
                "author": {"type": "string"},
                "since": {"type": ["string", "null"], "description": "ISO date."},
            },
            "required": ["author"],
        }
    },
}


def test_tool_help_renders_nested_refs_unions_and_arrays_of_objects() -> None:
    entry = ToolEntry("logs", "search_logs", "Search the logs.", NESTED)
    assert tool_help(entry) == (
        "tools logs search-logs\n"
        "Search the logs.\n"
        "Input:\n"
        "  query    string           (required)  What to find.\n"
        "  filter   object           (required)  Narrow the results.\n"
        "    author  string       (required)\n"
        "    since   string|null  ISO date.\n"
        '  sort     string|null      (one of: "new", "old"; default: null)\n'
        "  events   array of object  (required)\n"
        "    name  string  (required)\n"
        "  verbose  boolean          (required)\n"
        "  mode     string           (required)\n"
        "  extra    any\n"
        f"{EXACT}\n"
        "Example: tools logs search-logs query=<string> filter='{…}' --verbose mode=fast events='[…]'\n"
    )


def test_search_text_lists_hits_best_first() -> None:
    hits = [FakeHit(LIST_PULLS, 3.0), FakeHit(WEB_FETCH, 1.0)]
    assert search_text(hits) == (
        "tools github list-pulls  [read-only] List pull requests in a repository.\n"
        "tools web-fetch          [read-only] Fetch a URL and return its text.\n"
    )


def test_search_text_without_hits_suggests_what_to_do() -> None:
    assert search_text([]) == "No tools match. Try other or fewer words, or tools --help for the full list.\n"


def test_long_first_sentences_are_shortened() -> None:
    entry = ToolEntry("x", "y", "word " * 40)
    assert search_text([FakeHit(entry, 1.0)]) == "tools x y  " + ("word " * 24).rstrip() + "…\n"


def test_verb_help_explains_search_and_plan_and_nothing_else() -> None:
    assert verb_help("search") == (
        "tools search <words>\n"
        "Finds tools by name, description and parameter names, best first; also matches server names\n"
        "and loads a not-loaded server that matches. Names the servers it could not search (tools not\n"
        "listed yet) and how to include them.\n"
        "Example: tools search pull request\n"
    )
    plan = verb_help("plan")
    assert plan is not None and plan.startswith("tools plan < script\nRuns nothing.")
    assert verb_help("github") is None


def test_server_description_is_optional() -> None:
    cat = FakeCatalog(servers=[ServerInfo("mem", True, 0)])
    assert top_help(cat).startswith("MCP servers (tools <server> --help lists its tools):\n  mem  0 tools\nUsage:\n")
