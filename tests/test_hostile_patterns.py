"""Schema regexes run in linear time: a catastrophic `pattern` from a server cannot freeze the host."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from _hostile_serve_support import bash_into, serving_hostile
from _net_support import wait_until_serving
from toolshell.errors import ToolshellError
from toolshell.registry.entry import ToolEntry
from toolshell.registry.linear_regex import pattern_notes
from toolshell.registry.validate import schema_notes, validate_input

HOSTILE = Path(__file__).parent / "servers" / "hostile_server.py"
EVIL_INPUT = "a" * 40 + "!"


@pytest.fixture
def serving(tmp_path: Path) -> Iterator[str]:
    """`toolshell serve --http` in its own process, with the hostile server configured; yields its URL."""
    with serving_hostile(tmp_path, [str(HOSTILE)]) as url:
        yield url


@pytest.mark.anyio
async def test_a_catastrophic_pattern_is_answered_and_another_sessions_call_meanwhile_completes(serving: str) -> None:
    out: dict[str, Any] = {}
    with anyio.fail_after(30):  # a safety net only: a backtracking engine needs years for this input
        await wait_until_serving(serving, 30)
        async with anyio.create_task_group() as tg:
            second = anyio.Event()
            tg.start_soon(bash_into, serving, "tools evil echo text=meanwhile", out, "other", second)
            await second.wait()  # the other session is connected before the hostile call starts
            tg.start_soon(bash_into, serving, f"tools evil match text={EVIL_INPUT}", out, "evil")
            tg.start_soon(bash_into, serving, "tools evil match text=aaaa", out, "fine")
    evil = json.loads(out["evil"]["stderr"])["error"]
    assert (evil["code"], evil["message"].split(": at ")[1].split(". Run")[0]) == (
        "invalid_input",
        f"/text: {EVIL_INPUT!r} does not match '^(a+)+$'",
    )
    assert out["fine"]["stdout"] == "matched aaaa\n"
    assert out["other"]["stdout"] == "meanwhile\n"


def _entry(schema: dict[str, Any]) -> ToolEntry:
    return ToolEntry("s", "t", input_schema={"type": "object", **schema})


def test_pattern_properties_and_additional_properties_match_with_re2() -> None:
    entry = _entry({"patternProperties": {"^(a+)+$": {"type": "integer"}}, "additionalProperties": False})
    validate_input(entry, {"aaaa": 1})
    with pytest.raises(ToolshellError) as bad_value:
        validate_input(entry, {"aaaa": "x"})
    with pytest.raises(ToolshellError) as extra:
        validate_input(entry, {EVIL_INPUT: 1})
    assert bad_value.value.detail == {"path": "/aaaa", "validator": "type"}
    assert extra.value.detail == {"path": "/", "validator": "additionalProperties"}


def test_a_pattern_re2_cannot_compile_is_skipped_with_a_note() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "string", "pattern": "^(?=a)b"}}}
    validate_input(ToolEntry("s", "t", input_schema=schema), {"n": "zzz"})  # not checked: let through
    assert schema_notes(schema) == [
        "pattern(s) '^(?=a)b' are not checked: the linear-time engine (RE2) cannot compile them"
    ]


def test_unevaluated_properties_beside_pattern_properties_is_noted_not_run_with_re() -> None:
    schema = {"patternProperties": {"^x": {}}, "unevaluatedProperties": False}
    validate_input(_entry(schema), {"x1": 1, "y": 2})
    assert pattern_notes(schema) == ["unevaluatedProperties is not checked in a schema that also has patternProperties"]


def test_a_schema_nested_too_deeply_is_reported_not_raised() -> None:
    schema: dict[str, Any] = {"type": "object"}
    for _ in range(5000):
        schema = {"type": "object", "properties": {"a": schema}}
    validate_input(ToolEntry("s", "deep", input_schema=schema), {"a": {}})
    assert schema_notes(schema) == ["the input schema is not plain JSON, or nested too deeply to check"]


def test_a_guard_regex_runs_in_linear_time_on_the_input_a_script_chose() -> None:
    from toolshell.config import GuardConfig
    from toolshell.policy.guardrails import RegexGuard

    guard = RegexGuard(GuardConfig(tool="evil:*", input='"(a+)+"'))
    entry = ToolEntry("evil", "match")
    assert guard.denies(entry, {"text": EVIL_INPUT}) is None
    assert guard.denies(entry, {"text": "aaaa"}) == "tools evil match: denied by a guard rule (guard rule for 'evil:*')"
