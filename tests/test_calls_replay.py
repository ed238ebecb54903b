"""The call feed of resume by replay (`calls.replay`), on its own: records kept until the run has
a key and then written in order, a run whose early records outgrow memory marked lost, a record
of another call stopping the script, and a recorded error raised again."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest

from toolshell.calls import replay
from toolshell.calls.prepare import PreparedCall
from toolshell.calls.replay import CallFeed
from toolshell.errors import ErrorCode, StopScript, ToolshellError
from toolshell.registry.entry import ToolEntry

TICK = ToolEntry("counter", "tick")


def _call(n: int) -> PreparedCall:
    return PreparedCall(TICK, {"n": n})


def _result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


def test_records_are_kept_until_the_run_has_a_key_then_written_in_order_and_later_ones_at_once() -> None:
    written: list[tuple[int, dict[str, Any]]] = []
    feed = CallFeed()
    for n in (1, 2):
        feed.record(feed.next_ordinal(), _call(n), "changes", _result(f"tick {n}"))
    assert written == []
    feed.attach(lambda ordinal, record: written.append((ordinal, record)))
    feed.record(feed.next_ordinal(), _call(3), "changes", _result("tick 3"))
    assert [o for o, _ in written] == [1, 2, 3]
    again = CallFeed(dict(written), resumed=True)
    replayed = [again.replay(again.next_ordinal(), _call(n)) for n in (1, 2, 3)]
    assert [r.result.content[0].text for r in replayed if r and r.result] == ["tick 1", "tick 2", "tick 3"]
    assert again.replay(again.next_ordinal(), _call(4)) is None, "past the records, calls go live"


def test_a_run_whose_records_outgrow_memory_before_it_has_a_key_cannot_be_resumed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(replay, "MAX_KEPT_BYTES", 1000)
    written: list[int] = []
    feed = CallFeed()
    feed.record(feed.next_ordinal(), _call(1), "changes", _result("x" * 2000))
    feed.attach(lambda ordinal, record: written.append(ordinal))
    assert feed.lost and written == []


def test_a_record_of_another_call_stops_the_script_naming_both() -> None:
    records: dict[int, dict[str, Any]] = {}
    first = CallFeed(write=lambda ordinal, record: records.__setitem__(ordinal, record))
    first.record(first.next_ordinal(), _call(7), "changes", _result("tick 7"))
    again = CallFeed(records, resumed=True)
    with pytest.raises(StopScript) as stop:
        again.replay(again.next_ordinal(), _call(8))
    assert stop.value.error.code == ErrorCode.STOPPED
    assert '`tools counter tick {"n":8}`' in stop.value.error.message
    assert '`tools counter tick {"n":7}`' in stop.value.error.message


def test_a_recorded_error_is_raised_again() -> None:
    records: dict[int, dict[str, Any]] = {}
    first = CallFeed(write=lambda ordinal, record: records.__setitem__(ordinal, record))
    first.record_error(first.next_ordinal(), _call(1), "changes", ToolshellError(ErrorCode.UNAVAILABLE, "timed out"))
    replayed = CallFeed(records, resumed=True).replay(1, _call(1))
    assert replayed is not None and replayed.result is None and replayed.error is not None
    assert (replayed.error.code, replayed.error.message) == (ErrorCode.UNAVAILABLE, "timed out")
