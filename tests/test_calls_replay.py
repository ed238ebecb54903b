"""The call feed of resume by replay (`calls.replay`), on its own: records kept until the run has
a key and then written in order, a run whose early records outgrow memory marked lost, a record
of another call stopping the script, and a recorded error raised again."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import mcp_types as types
import pytest

from toolshell.calls import pipeline, replay
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


class _Unopened(replay.InMemory):
    """Records where some rows are there but do not open (changed, or sealed with another key)."""

    def __init__(self, records: dict[int, dict[str, Any]], unopened: set[int]) -> None:
        super().__init__(records)
        self.unopened = unopened

    def get(self, ordinal: int) -> dict[str, Any] | None:
        return None if ordinal in self.unopened else super().get(ordinal)


def _first_run(*calls: int, held: tuple[int, ...] = ()) -> dict[int, dict[str, Any]]:
    """The records of a first run that made `calls` (those in `held` stopped before they were sent)."""
    records: dict[int, dict[str, Any]] = {}
    feed = CallFeed(write=lambda ordinal, record: records.__setitem__(ordinal, record))
    for n in calls:
        ordinal = feed.next_ordinal()
        if n not in held:
            feed.record(ordinal, _call(n), "changes", _result(f"tick {n}"))
    return records


def test_a_record_that_does_not_open_stops_the_replay_at_its_call_and_is_never_made_again() -> None:
    again = CallFeed(_Unopened(_first_run(1, 2), {1}), resumed=True)
    with pytest.raises(StopScript) as stop:
        again.replay(again.next_ordinal(), _call(1))
    assert stop.value.error.code == ErrorCode.STOPPED
    assert 'stopped at call 1 `tools counter tick {"n":1}`: its record in the store does not open' in (
        stop.value.error.message
    )
    assert "not made again" in stop.value.error.message


def test_a_call_without_a_record_whose_next_record_counts_one_more_before_it_stops_the_replay() -> None:
    records = _first_run(1, 2, 3)
    del records[2]  # whoever can write the store removed it
    again = CallFeed(records, resumed=True)
    assert again.replay(again.next_ordinal(), _call(1)) is not None
    with pytest.raises(StopScript) as stop:
        again.replay(again.next_ordinal(), _call(2))
    assert "stopped at call 2" in stop.value.error.message
    assert "call 3's record counts 2 recorded calls before it and the store holds 1" in stop.value.error.message


def test_a_next_record_that_does_not_open_stops_the_replay_at_the_call_without_a_record() -> None:
    records = _first_run(1, 2, 3, held=(2,))
    again = CallFeed(_Unopened(records, {3}), resumed=True)
    again.replay(again.next_ordinal(), _call(1))
    with pytest.raises(StopScript) as stop:
        again.replay(again.next_ordinal(), _call(2))
    assert "stopped at call 2" in stop.value.error.message and "the record of call 3 does not open" in (
        stop.value.error.message
    )


def test_calls_that_were_never_sent_or_still_in_flight_are_made_live_and_the_rest_answered() -> None:
    held = _first_run(1, 2, 3, held=(2,))  # call 2 was held for approval (or denied): never sent
    again = CallFeed(held, resumed=True)
    got = [again.replay(again.next_ordinal(), _call(n)) for n in (1, 2, 3)]
    assert [r is not None for r in got] == [True, False, True]
    records: dict[int, dict[str, Any]] = {}
    concurrent = CallFeed(write=lambda ordinal, record: records.__setitem__(ordinal, record))
    one, two, three = (concurrent.next_ordinal() for _ in range(3))
    concurrent.record(one, _call(1), "changes", _result("tick 1"))
    concurrent.record(three, _call(3), "changes", _result("tick 3"))  # call 2 was in flight when the worker died
    again = CallFeed(records, resumed=True)
    got = [again.replay(again.next_ordinal(), _call(n)) for n in (1, 2, 3)]
    assert [r is not None for r in got] == [True, False, True]


@pytest.mark.anyio
async def test_a_record_made_while_attach_writes_or_once_durable_is_kept_from_a_worker_thread_even_if_cancelled() -> (
    None
):
    """The send path keeps a record on the event loop only while the feed's records are in memory
    and free; while `attach` writes them from a thread, or once they go to the store, it keeps it
    from a worker thread (never waiting on the loop), shielded: a run being stopped keeps it."""
    loop_thread = threading.get_ident()
    written: list[tuple[int, int]] = []
    feed = CallFeed()
    with feed.in_memory() as here:
        assert here, "in memory and free: kept on the loop"
    holding, release = threading.Event(), threading.Event()

    def attach_elsewhere() -> None:  # `attach` in a worker thread, its lock held while it writes
        with feed._lock:
            holding.set()
            release.wait(30)

    worker = threading.Thread(target=attach_elsewhere)
    worker.start()
    holding.wait(30)
    with feed.in_memory() as here:
        busy = here
    release.set()
    worker.join(30)
    feed.attach(lambda ordinal, record: written.append((ordinal, threading.get_ident())))
    with feed.in_memory() as here:
        durable = here
    with anyio.CancelScope() as scope:
        scope.cancel()  # the run is being stopped as its call's result comes back
        await pipeline._keep(feed, feed.record, feed.next_ordinal(), _call(1), "changes", _result("tick 1"))
    assert busy is False and durable is False
    assert [o for o, _ in written] == [1] and written[0][1] != loop_thread, "kept from a worker thread"
