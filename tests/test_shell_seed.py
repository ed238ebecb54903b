"""The seed's `tools` examples, run exactly as written in a real session against an in-process `github`."""

from __future__ import annotations

from typing import Any

import pytest

from _github_server import make_github
from toolshell.config import Config
from toolshell.host import Host

pytestmark = pytest.mark.anyio


def _host(calls: list[tuple[str, dict[str, Any]]], config: Config | None = None, **kwargs: Any) -> Any:
    return Host.open(config or Config(), servers={"github": make_github(calls)}, **kwargs)


async def test_the_seed_pipeline_chains_calls_and_filters_with_jq() -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    script = """
tools github list-pulls '{"repo":"acme/api","state":"open"}' \\
  | jq -r '.[] | select(.draft | not) | .number' \\
  | while read n; do
      tools github get-pull "repo=acme/api" "number=$n" | jq -c '{number, title, mergeable}'
    done
"""
    async with _host(calls) as host:
        result = await host.run(script)
    assert result.stderr == ""
    assert result.stdout == (
        '{"number":7,"title":"Fix flaky test","mergeable":true}\n{"number":9,"title":"Bump deps","mergeable":true}\n'
    )
    assert result.exit_code == 0
    assert calls == [
        ("list-pulls", {"repo": "acme/api", "state": "open"}),
        ("get-pull", {"repo": "acme/api", "number": 7}),
        ("get-pull", {"repo": "acme/api", "number": 9}),
    ]


async def test_input_comes_from_stdin_when_there_are_no_arguments() -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    async with _host(calls) as host:
        result = await host.run("""jq -n '{repo: "a/b"}' | tools github list-pulls | jq length""")
    assert (result.stdout, result.exit_code) == ("3\n", 0)
    assert calls == [("list-pulls", {"repo": "a/b", "state": "open"})]


async def test_a_dash_reads_stdin_and_pairs_merge_over_it() -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    async with _host(calls) as host:
        result = await host.run("""echo '{"repo": "a/b", "state": "open"}' | tools github list-pulls - state=closed""")
    assert result.exit_code == 0, result.stderr
    assert calls == [("list-pulls", {"repo": "a/b", "state": "closed"})]


async def test_schema_string_keys_stay_text_and_numbers_become_numbers() -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    async with _host(calls) as host:
        result = await host.run("tools github get-pull repo=42 number=7 | jq -c '{repo, number}'")
    assert result.stdout == '{"repo":"42","number":7}\n'
    assert calls == [("get-pull", {"repo": "42", "number": 7})]


async def test_a_flag_alone_is_true_and_hyphens_and_underscores_are_interchangeable() -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    async with _host(calls) as host:
        result = await host.run("tools github search_code --query foo --exact; tools github search-code query=bar")
    assert result.stdout == "query=foo exact=True\nquery=bar exact=False\n"
    assert calls == [
        ("search-code", {"query": "foo", "exact": True}),
        ("search-code", {"query": "bar", "exact": False}),
    ]


async def test_the_flat_mcp_name_resolves_to_the_same_tool() -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    async with _host(calls) as host:
        entries = {e.flat_name: e for e in await host.list_tools()}
    assert entries["mcp_github__list-pulls"].command == "tools github list-pulls"
