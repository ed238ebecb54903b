"""Saved scripts through `tools scripts`: save, list, run with checked input, nesting, the shared budget."""

from __future__ import annotations

import json
from typing import Any

import pytest

from _github_server import make_github
from toolshell.config import Config
from toolshell.host import Host

pytestmark = pytest.mark.anyio

MANAGE = Config.model_validate({"tools_in_shell": {"manage_scripts": True}})

SEED_SAVE = """cat <<'EOF' | tools scripts save triage-prs --description 'Label new pull requests.' \\
  --input-schema '{"type":"object","properties":{"repo":{"type":"string"}},"required":["repo"]}'
repo=$(jq -r .repo)
tools github list-pulls repo="$repo" state=open | jq -r '.[].number' | while read -r n; do
  tools github add-labels repo="$repo" number="$n" labels='["triage"]'
done
EOF
"""


def _open(calls: list[Any], config: Config = MANAGE) -> Any:
    return Host.open(config, servers={"github": make_github(calls)})


def _last_error(stderr: str) -> dict[str, Any]:
    return json.loads([line for line in stderr.splitlines() if line.startswith('{"error"')][-1])["error"]


async def test_the_seed_saved_script_is_saved_listed_and_run_with_its_input() -> None:
    calls: list[Any] = []
    async with _open(calls) as host:
        session = host.session()
        saved = await session.run(SEED_SAVE)
        listed = await session.run("tools scripts")
        ran = await session.run("tools scripts triage-prs repo=a/b")
    assert saved.stdout == "saved script triage-prs\n", saved.stderr
    assert "triage-prs" in listed.stdout and "Label new pull requests." in listed.stdout
    assert ran.exit_code == 0, ran.stderr
    assert calls == [
        ("list-pulls", {"repo": "a/b", "state": "open"}),
        *[("add-labels", {"repo": "a/b", "number": n, "labels": ["triage"]}) for n in (7, 8, 9)],
    ]
    assert [d["tool"] for d in ran.tools["done"]] == ["tools github add-labels"] * 3


async def test_saving_needs_manage_scripts() -> None:
    async with _open([], Config()) as host:
        result = await host.run(SEED_SAVE)
    err = _last_error(result.stderr)
    assert err["code"] == "denied" and "manage_scripts" in err["message"]


async def test_a_saved_scripts_input_is_checked_against_its_schema() -> None:
    calls: list[Any] = []
    async with _open(calls) as host:
        session = host.session()
        await session.run(SEED_SAVE)
        result = await session.run("tools scripts triage-prs number=3")
    assert _last_error(result.stderr)["code"] == "invalid_input"
    assert calls == []


async def test_curl_is_not_available_inside_a_saved_script() -> None:
    async with _open([]) as host:
        session = host.session()
        await session.run("echo 'curl http://127.0.0.1:1/' | tools scripts save fetcher")
        result = await session.run("tools scripts fetcher")
    assert _last_error(result.stderr)["code"] == "unavailable"


async def test_saved_scripts_nest_up_to_four_deep() -> None:
    async with _open([]) as host:
        session = host.session()
        body = "d=$(jq .d); echo depth=$d; tools scripts deeper d=$((d+1))"
        await session.run(f"echo '{body}' | tools scripts save deeper")
        result = await session.run("tools scripts deeper d=1")
    assert result.stdout.split() == ["depth=1", "depth=2", "depth=3", "depth=4"]
    assert "4 deep" in result.stderr


async def test_a_stop_inside_a_saved_script_stops_the_caller_too() -> None:
    calls: list[Any] = []
    async with _open(calls) as host:
        session = host.session()
        body = "tools github create-issue title=x; b=fix; tools github delete-branch branch=$b"
        await session.run(f"echo '{body}' | tools scripts save cleanup")
        result = await session.run("tools scripts cleanup; echo caller-went-on")
    assert "caller-went-on" not in result.stdout
    assert result.tools["stopped"]["reason"] == "needs_approval"
    assert [d["tool"] for d in result.tools["done"]] == ["tools github create-issue"]
    assert calls == [("create-issue", {"title": "x"})]


async def test_saved_scripts_share_the_callers_call_budget() -> None:
    calls: list[Any] = []
    config = Config.model_validate({"tools_in_shell": {"manage_scripts": True, "call_limit": 4}})
    async with _open(calls, config) as host:
        session = host.session()
        body = "for i in 1 2 3; do tools github list-pulls repo=a/b >/dev/null; done"
        await session.run(f"echo '{body}' | tools scripts save three")
        result = await session.run("tools scripts three; tools scripts three")
    assert result.tools["stopped"]["reason"] == "call_limit"
    assert len(calls) == 4


async def test_a_script_that_does_not_parse_is_not_saved() -> None:
    async with _open([]) as host:
        session = host.session()
        result = await session.run("printf 'echo ok\\nif then\\n' | tools scripts save broken")
        listed = await session.run("tools scripts")
    err = _last_error(result.stderr)
    assert err["code"] == "invalid_input"
    assert err["message"] == (
        "the script does not parse (parse error at line 2, column 4: syntax error near unexpected token `then'); "
        "fix it, nothing was saved"
    )
    assert "broken" not in listed.stdout
