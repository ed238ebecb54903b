"""Timeline sinks: memory and SQLite give the same grouped rows; the text and JSON renderings."""

from __future__ import annotations

import json
from datetime import UTC

import anyio
import pytest

from toolshell.store.sqlite import Store
from toolshell.timeline import MemorySink, NestedCall, ShellCall, SqliteSink, query, render_timeline, timeline_json
from toolshell.timeline.held import Held, holding

T0 = 1_735_787_045.0  # 2025-01-02 03:04:05 UTC


def _events() -> list[ShellCall | NestedCall]:
    """Two sessions; the first shell call is emitted at its start and again at its end."""
    pulls, get, rm = "tools github list-pulls", "tools github get-pull", "tools github delete-branch"
    return [
        ShellCall("sh1", "sess-a", "tools github list-pulls state=open ⏎ …", None, T0, None, "agent"),
        NestedCall("n1", "sh1", "sess-a", pulls, '{"state":"open"}', "completed", None, 5.2, T0 + 0.1),
        NestedCall("n2", "sh1", "sess-a", get, '{"number":7}', "failed", "tool_error", 1500, T0 + 0.2),
        NestedCall(
            "n3", "sh1", "sess-a", rm, '{"branch":"x"}', "stopped_for_approval", "needs_approval", 0.4, T0 + 0.3
        ),
        ShellCall("sh1", "sess-a", "tools github list-pulls state=open ⏎ …", 1, T0, 1612.0, "agent"),
        ShellCall("sh2", "sess-b", "tools scripts nightly", 0, T0 + 60, 20.0, "trigger"),
        NestedCall("n4", "sh2", "sess-b", "tools time now", "{}", "refused", "denied", 0.0, T0 + 60.5),
        ShellCall("sh3", "sess-a", "echo running", None, T0 + 120, None, "cli"),
    ]


EXPECTED_TEXT = """\
2025-01-02 03:06:05  sess-a  [cli]  echo running  running
2025-01-02 03:05:05  sess-b  [trigger]  tools scripts nightly  exit 0  20 ms
  ⊘ tools time now  {}  0 ms  denied
2025-01-02 03:04:05  sess-a  [agent]  tools github list-pulls state=open ⏎ …  exit 1  1.6 s
  ✓ tools github list-pulls  {"state":"open"}  5 ms
  ✗ tools github get-pull  {"number":7}  1.5 s  tool_error
  ⏸ tools github delete-branch  {"branch":"x"}  0 ms  needs_approval
"""


def _memory() -> MemorySink:
    sink = MemorySink()
    for e in _events():
        sink.emit(e)
    return sink


def _sqlite() -> Store:
    store = Store(":memory:")
    sink = SqliteSink(store)
    for e in _events():
        sink.emit(e)
    return store


def test_memory_sink_keeps_every_event_in_emission_order():
    sink = _memory()
    assert [e.id for e in sink.events] == ["sh1", "n1", "n2", "n3", "sh1", "sh2", "n4", "sh3"]


def test_sqlite_query_groups_nested_calls_under_their_shell_call_newest_first():
    rows = query(_sqlite())
    assert [(r["id"], r["exit_code"], [c["id"] for c in r["calls"]]) for r in rows] == [
        ("sh3", None, []),
        ("sh2", 0, ["n4"]),
        ("sh1", 1, ["n1", "n2", "n3"]),
    ]


def test_sqlite_rows_carry_every_event_field():
    row = query(_sqlite(), session_id="sess-b")[0]
    assert row == {
        "id": "sh2",
        "type": "shell.call",
        "session_id": "sess-b",
        "script_preview": "tools scripts nightly",
        "exit_code": 0,
        "started_at": T0 + 60,
        "duration_ms": 20.0,
        "source": "trigger",
        "caller": None,
        "address": None,
        "worker": None,
        "ended_by": None,
        "calls": [
            {
                "id": "n4",
                "type": "tool.nested_call",
                "shell_call_id": "sh2",
                "session_id": "sess-b",
                "command": "tools time now",
                "input_preview": "{}",
                "outcome": "refused",
                "error_code": "denied",
                "duration_ms": 0.0,
                "started_at": T0 + 60.5,
            }
        ],
    }


def test_memory_and_sqlite_give_the_same_rows():
    assert _memory().timeline() == query(_sqlite())
    assert _memory().timeline(session_id="sess-a", limit=1) == query(_sqlite(), session_id="sess-a", limit=1)


def test_re_emitting_a_shell_call_updates_it_instead_of_adding_one():
    store = _sqlite()
    assert store.query("SELECT COUNT(*) AS n FROM shell_calls")[0]["n"] == 3
    assert [r["exit_code"] for r in query(store, session_id="sess-a")] == [None, 1]


def test_query_filters_by_session_and_limits_the_number_of_shell_calls():
    store = _sqlite()
    assert [r["id"] for r in query(store, session_id="sess-a")] == ["sh3", "sh1"]
    assert [r["id"] for r in query(store, limit=2)] == ["sh3", "sh2"]
    assert query(store, session_id="nobody") == []


def test_nested_calls_are_listed_in_the_order_they_started_even_if_recorded_out_of_order():
    store = Store(":memory:")
    sink = SqliteSink(store)
    sink.emit(ShellCall("s", "x", "…", 0, T0, 1.0, "cli"))
    sink.emit(NestedCall("late", "s", "x", "tools b", "{}", "completed", None, 1.0, T0 + 2))
    sink.emit(NestedCall("early", "s", "x", "tools a", "{}", "completed", None, 1.0, T0 + 1))
    sink.flush()
    assert [c["id"] for c in query(store)[0]["calls"]] == ["early", "late"]


def test_nested_calls_are_written_in_batches_at_shell_call_events_and_every_batch_size():
    store = Store(":memory:")
    sink = SqliteSink(store, batch=3)
    sink.emit(ShellCall("s", "x", "…", None, T0, None, "cli"))
    for i in range(2):
        sink.emit(NestedCall(f"n{i}", "s", "x", "tools a", "{}", "completed", None, 1.0, T0 + i))
    assert query(store)[0]["calls"] == [], "not written yet: one commit per call costs more than the call"
    sink.emit(NestedCall("n2", "s", "x", "tools a", "{}", "completed", None, 1.0, T0 + 2))
    assert len(query(store)[0]["calls"]) == 3, "the batch size was reached"
    sink.emit(NestedCall("n3", "s", "x", "tools a", "{}", "completed", None, 1.0, T0 + 3))
    sink.emit(ShellCall("s", "x", "…", 0, T0, 5.0, "cli"))
    assert [c["id"] for c in query(store)[0]["calls"]] == ["n0", "n1", "n2", "n3"], "the shell call's end flushed"


def test_sqlite_sink_keeps_events_across_store_reopen(tmp_path):
    path = tmp_path / "state.db"
    store = Store(path)
    SqliteSink(store).emit(ShellCall("s", "x", "echo", 0, T0, 1.0, "cli"))
    store.close()
    reopened = Store(path)
    assert [r["id"] for r in query(reopened)] == ["s"]
    reopened.close()


def test_query_on_a_store_no_sink_wrote_to_is_empty():
    assert query(Store(":memory:")) == []


def test_render_timeline_shows_shell_calls_with_indented_nested_rows():
    assert render_timeline(query(_sqlite()), tz=UTC) == EXPECTED_TEXT


def test_render_timeline_of_memory_rows_is_the_same_text():
    assert render_timeline(_memory().timeline(), tz=UTC) == EXPECTED_TEXT


def test_a_shell_call_served_over_http_shows_where_its_caller_came_from() -> None:
    store = Store(":memory:")
    SqliteSink(store).emit(ShellCall("s", "x", "echo hi", 0, T0, 1.0, "agent", caller="c1", address="192.0.2.7"))
    assert query(store)[0]["address"] == "192.0.2.7"
    assert "  [agent from 192.0.2.7]  echo hi  exit 0" in render_timeline(query(store), tz=UTC)


def test_render_timeline_says_when_there_is_nothing_yet():
    assert render_timeline([]) == "no shell calls recorded yet\n"


@pytest.mark.parametrize("rows", [[], "sample"])
def test_timeline_json_round_trips_the_rows(rows):
    rows = query(_sqlite()) if rows == "sample" else rows
    text = timeline_json(rows)
    assert text.endswith("\n")
    assert json.loads(text) == rows


@pytest.mark.anyio
async def test_a_finished_nested_call_is_written_within_the_flush_interval_while_its_shell_call_runs() -> None:
    store = Store(":memory:")
    sink = SqliteSink(store)
    sink.emit(ShellCall("s", "x", "…", None, T0, None, "agent"))  # the shell call goes on running
    sink.emit(NestedCall("n0", "s", "x", "tools github list-pulls", "{}", "completed", None, 1.0, T0))
    assert query(store)[0]["calls"] == [], "batched: not one commit per call"
    with anyio.fail_after(10):  # the timer writes it within FLUSH_SECONDS; the deadline is generous
        while not query(store)[0]["calls"]:  # noqa: ASYNC110  (a timer writes the store: nothing to wait on)
            await anyio.sleep(0.05)  # a poll, bounded above
    assert [c["id"] for c in query(store)[0]["calls"]] == ["n0"] and query(store)[0]["exit_code"] is None


@pytest.mark.anyio
async def test_a_call_that_stopped_for_approval_is_written_at_once() -> None:
    store = Store(":memory:")
    sink = SqliteSink(store, flush_seconds=3600)  # no timer would write it in time
    sink.emit(ShellCall("s", "x", "…", None, T0, None, "agent"))
    sink.emit(NestedCall("n0", "s", "x", "tools github list-pulls", "{}", "completed", None, 1.0, T0))
    sink.emit(NestedCall("n1", "s", "x", "tools github wipe", "{}", "stopped_for_approval", "needs_approval", 0, T0))
    assert [c["outcome"] for c in query(store)[0]["calls"]] == ["completed", "stopped_for_approval"]


def test_rows_a_failed_write_kept_are_written_over_what_reached_the_store() -> None:
    """A call's rows whose write failed (perhaps after its commit: a connection lost) are kept for
    the next write, which updates the rows that did reach the store instead of adding them again."""
    store = Store(":memory:")
    sink = SqliteSink(store)
    held = Held()
    with holding(held):
        sink.emit(ShellCall("s", "x", "echo", None, T0, None, "agent"))
        sink.write_held(held)  # it reached the store
        sink.emit(ShellCall("s", "x", "echo", 0, T0, 5.0, "agent"))
        sink.emit(NestedCall("s.1", "s", "x", "tools time now", "{}", "completed", None, 1.0, T0))
    sink.keep(held)  # as if its commit failed
    sink.flush()
    [row] = query(store)
    assert (row["exit_code"], [c["id"] for c in row["calls"]]) == (0, ["s.1"])
