# ruff: noqa: F811  (the engine fixtures are imported from _store_support and named as parameters)
"""Each piece of state behind the store interface, on both engines: what one process writes,
another process reading the same store sees."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from _store_support import ENGINES, postgres_server, store_url  # noqa: F401  (fixtures)
from toolshell.scripts.store import ScriptStore
from toolshell.store.engines import open_store
from toolshell.store.event_log import StateEventStore
from toolshell.store.protocol import StateStore
from toolshell.timeline.events import NestedCall, ShellCall
from toolshell.timeline.sinks import SqliteSink, query

pytestmark = pytest.mark.parametrize("store_url", ENGINES, indirect=True)


@pytest.fixture
def two(store_url: str) -> Iterator[tuple[StateStore, StateStore]]:
    """Two processes' stores on one place."""
    a, b = open_store(store_url), open_store(store_url)
    yield a, b
    a.close()
    b.close()


def test_the_timeline_one_worker_writes_is_what_another_reads(two: tuple[StateStore, StateStore]) -> None:
    a, b = two
    sink = SqliteSink(a)
    sink.emit(ShellCall("sh1", "sess", "tools x y", None, 100.0, None, "agent", caller="token:abc"))
    sink.emit(NestedCall("sh1.1", "sh1", "sess", "tools x y", "{}", "completed", None, 1.25, 100.5))
    sink.emit(ShellCall("sh1", "sess", "tools x y", 0, 100.0, 3.5, "agent", caller="token:abc"))
    rows = query(b)
    assert [(r["id"], r["exit_code"], r["caller"], r["duration_ms"]) for r in rows] == [("sh1", 0, "token:abc", 3.5)]
    assert [(c["id"], c["outcome"], c["duration_ms"], c["started_at"]) for c in rows[0]["calls"]] == [
        ("sh1.1", "completed", 1.25, 100.5)
    ]


def test_saved_scripts_are_replaced_by_name_and_listed_from_another_worker(two: tuple[StateStore, StateStore]) -> None:
    a, b = two
    ScriptStore(a, clock=lambda: 10.0).save("count-words", "wc -w", "Count.")
    ScriptStore(a, clock=lambda: 20.0).save("count_words", "wc -w # v2", "Count words.")
    [script] = ScriptStore(b).list()
    assert (script.name, script.body, script.description, script.created_at, script.updated_at) == (
        "count_words",
        "wc -w # v2",
        "Count words.",
        10.0,
        20.0,
    )


def test_stream_events_appended_by_one_worker_are_replayed_by_another_within_bounds(
    two: tuple[StateStore, StateStore],
) -> None:
    a, b = two
    writer, reader = StateEventStore(a, max_events=3), StateEventStore(b, max_events=3)
    ids = [writer.append("stream-1", f'{{"n": {n}}}') for n in range(5)]
    writer.append("stream-2", None)
    assert reader.stream_of(ids[-1]) == "stream-1"
    assert [e.body for e in reader.after(ids[2], "stream-1")] == ['{"n": 3}', '{"n": 4}']
    assert len(reader) == 3, "the oldest went past max_events"
    assert reader.stream_of(ids[0]) is None
