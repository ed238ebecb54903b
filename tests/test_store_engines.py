# ruff: noqa: F811  (the engine fixtures are imported from _store_support and named as parameters)
"""The store contract, run on both engines (SQLite and a real PostgreSQL), the way database drivers
test every dialect: numbered migrations applied once, portable SQL, atomic transitions, and
wake-ups (`notify` in one worker wakes a subscriber in another)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import pytest

from _store_support import ENGINES, postgres_server, store_url  # noqa: F401  (fixtures)
from toolshell.errors import ToolshellError
from toolshell.store.engines import open_store
from toolshell.store.pg_listen import APPLICATION_NAME, PG_CHANNEL
from toolshell.store.protocol import StateStore, Subscription, rows_as_dicts

both_engines = pytest.mark.parametrize("store_url", ENGINES, indirect=True)

NOTES_V1 = """
CREATE TABLE notes (id {serial}, body TEXT NOT NULL, score DOUBLE PRECISION);  -- the first shape
CREATE INDEX notes_body ON notes (body);
"""
NOTES_V2 = "ALTER TABLE notes ADD COLUMN state TEXT NOT NULL DEFAULT 'active'"


@pytest.fixture
def store(store_url: str) -> Iterator[StateStore]:
    opened = open_store(store_url)
    yield opened
    opened.close()


def _in_threads(count: int, work: Callable[[int], Any]) -> list[Any]:
    results: list[Any] = [None] * count
    start = threading.Barrier(count)

    def run(i: int) -> None:
        start.wait()
        try:
            results[i] = work(i)
        except BaseException as exc:  # re-raised below, in the test's thread
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results


@both_engines
def test_migration_steps_apply_in_order_once_and_a_later_step_keeps_the_rows(store: StateStore) -> None:
    store.migrate("notes", [NOTES_V1])
    store.execute("INSERT INTO notes (body, score) VALUES (?, ?)", ("kept", 1.5))
    store.migrate("notes", [NOTES_V1])  # nothing new: a no-op
    store.migrate("notes", [NOTES_V1, NOTES_V2])
    rows = list(rows_as_dicts(store.query("SELECT id, body, score, state FROM notes")))
    versions = store.query("SELECT version FROM toolshell_migrations WHERE component = ? ORDER BY version", ("notes",))
    assert rows == [{"id": 1, "body": "kept", "score": 1.5, "state": "active"}]
    assert [r["version"] for r in versions] == [1, 2]


@both_engines
def test_processes_migrating_at_once_apply_each_step_once(store_url: str) -> None:
    steps = [NOTES_V1, "INSERT INTO notes (body) VALUES ('seeded once')"]

    def migrate(_: int) -> None:
        other = open_store(store_url)
        try:
            other.migrate("notes", steps)
        finally:
            other.close()

    _in_threads(4, migrate)
    check = open_store(store_url)
    try:
        assert [r["body"] for r in check.query("SELECT body FROM notes")] == ["seeded once"]
    finally:
        check.close()


@both_engines
def test_a_serial_key_numbers_rows_and_returning_gives_the_new_one(store: StateStore) -> None:
    store.migrate("notes", [NOTES_V1])
    ids = [store.query("INSERT INTO notes (body) VALUES (?) RETURNING id", (f"n{i}",))[0]["id"] for i in range(3)]
    assert ids == [1, 2, 3]


@both_engines
def test_question_marks_and_percent_signs_in_quoted_text_are_data(store: StateStore) -> None:
    store.migrate("notes", [NOTES_V1])
    store.execute("INSERT INTO notes (body) VALUES ('what? 100%')")
    store.execute("INSERT INTO notes (body) VALUES (?)", ("a ? b % c",))
    rows = store.query("SELECT body FROM notes WHERE body LIKE '%?%' AND body <> ? ORDER BY id", ("none",))
    assert [r["body"] for r in rows] == ["what? 100%", "a ? b % c"]


@both_engines
def test_a_transaction_that_raises_writes_nothing(store: StateStore) -> None:
    store.migrate("notes", [NOTES_V1])
    with pytest.raises(RuntimeError), store.transaction() as tx:
        tx.execute("INSERT INTO notes (body) VALUES (?)", ("lost",))
        assert [r["body"] for r in tx.query("SELECT body FROM notes")] == ["lost"], "seen inside"
        raise RuntimeError("abort")
    assert store.query("SELECT body FROM notes") == []


@both_engines
def test_an_upsert_on_conflict_updates_the_row(store: StateStore) -> None:
    store.migrate("kv", ["CREATE TABLE kv (key TEXT PRIMARY KEY, value TEXT NOT NULL)"])
    upsert = "INSERT INTO kv (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
    store.execute(upsert, ("a", "1"))
    store.execute(upsert, ("a", "2"))
    store.executemany(upsert, [("b", "3"), ("a", "4")])
    assert list(rows_as_dicts(store.query("SELECT key, value FROM kv ORDER BY key"))) == [
        {"key": "a", "value": "4"},
        {"key": "b", "value": "3"},
    ]


@both_engines
def test_a_conditional_update_is_won_by_exactly_one_of_several_processes(store_url: str) -> None:
    setup = open_store(store_url)
    setup.migrate("grants", ["CREATE TABLE grants (id {serial}, state TEXT NOT NULL)"])
    stores = [open_store(store_url) for _ in range(3)]
    try:
        for _ in range(20):
            gid = setup.query("INSERT INTO grants (state) VALUES ('active') RETURNING id")[0]["id"]
            won = _in_threads(
                3,
                lambda i, gid=gid: (
                    stores[i]
                    .execute("UPDATE grants SET state = 'used' WHERE id = ? AND state = 'active'", (gid,))
                    .rowcount
                ),
            )
            assert sorted(won) == [0, 0, 1]
    finally:
        for s in [setup, *stores]:
            s.close()


@both_engines
def test_a_transition_in_a_transaction_is_decided_once_across_processes(store_url: str) -> None:
    """The shape of "answer a request": flip its status only if still pending, and write the grant
    in the same transaction; two answerers at once give one grant."""
    setup = open_store(store_url)
    setup.migrate(
        "answers",
        [
            "CREATE TABLE requests (id TEXT PRIMARY KEY, status TEXT NOT NULL);"
            "CREATE TABLE answers (id {serial}, request_id TEXT NOT NULL)"
        ],
    )
    stores = [open_store(store_url) for _ in range(2)]

    def answer(i: int, rid: str) -> bool:
        with stores[i].transaction() as tx:
            flipped = tx.execute("UPDATE requests SET status = 'granted' WHERE id = ? AND status = 'pending'", (rid,))
            if flipped.rowcount != 1:
                return False
            tx.execute("INSERT INTO answers (request_id) VALUES (?)", (rid,))
            return True

    try:
        for n in range(20):
            rid = f"r{n}"
            setup.execute("INSERT INTO requests (id, status) VALUES (?, 'pending')", (rid,))
            assert sorted(_in_threads(2, lambda i, rid=rid: answer(i, rid))) == [False, True]
        assert setup.query("SELECT COUNT(*) AS n FROM answers")[0]["n"] == 20
    finally:
        for s in [setup, *stores]:
            s.close()


def test_a_url_of_another_scheme_is_refused_naming_the_two_forms() -> None:
    with pytest.raises(ToolshellError) as err:
        open_store("mysql://root:hunter2@db/state")
    assert "postgresql://user@host/db" in err.value.message and "hunter2" not in err.value.message


def test_an_unreachable_postgresql_is_unavailable_without_its_password(tmp_path: Any) -> None:
    with pytest.raises(ToolshellError) as err:
        open_store(f"postgresql://app:hunter2@/state?host={tmp_path}&connect_timeout=2")
    assert err.value.code == "unavailable" and err.value.retryable
    assert "hunter2" not in err.value.message and "TOOLSHELL_STATE_URL" in err.value.message


# --- wake-ups: `notify` in one store wakes `subscribe(...).wait()` in another ---------------------


@pytest.fixture
def two_stores(store_url: str) -> Iterator[tuple[StateStore, StateStore]]:
    """Two stores on one location: two workers."""
    one, two = open_store(store_url), open_store(store_url)
    yield one, two
    one.close()
    two.close()


async def _payloads_until(subscription: Subscription, last: str) -> list[str]:
    """Every payload a subscription receives, up to and including `last`."""
    seen: list[str] = []
    with anyio.fail_after(10):
        while last not in seen:
            seen.extend((await subscription.wait()).payloads)
    return seen


@both_engines
@pytest.mark.anyio
async def test_a_notification_from_another_worker_wakes_a_subscriber_with_its_payload(
    two_stores: tuple[StateStore, StateStore],
) -> None:
    one, two = two_stores
    with one.subscribe("approvals") as subscription:
        two.notify("approvals", "apr_1")
        two.notify("scripts", "not for this channel")
        two.notify("approvals", "apr_2")
        assert await _payloads_until(subscription, "apr_2") == ["apr_1", "apr_2"]


@both_engines
@pytest.mark.anyio
async def test_a_notification_in_this_worker_wakes_a_subscriber_on_the_same_store(store: StateStore) -> None:
    with store.subscribe("approvals") as subscription:
        store.notify("approvals", "apr_1")
        with anyio.fail_after(10):
            wake = await subscription.wait()
    assert wake.payloads == ("apr_1",) and not wake.missed


@both_engines
@pytest.mark.anyio
async def test_a_notification_in_a_transaction_is_sent_when_it_commits_and_never_when_it_rolls_back(
    two_stores: tuple[StateStore, StateStore],
) -> None:
    one, two = two_stores
    one.migrate("notes", [NOTES_V1])
    with one.subscribe("notes") as subscription:
        with pytest.raises(RuntimeError), two.transaction() as tx:
            tx.execute("INSERT INTO notes (body) VALUES (?)", ("lost",))
            two.notify("notes", "rolled back")
            raise RuntimeError("abort")
        with two.transaction() as tx:
            tx.execute("INSERT INTO notes (body) VALUES (?)", ("kept",))
            two.notify("notes", "committed")
        assert await _payloads_until(subscription, "committed") == ["committed"]
        assert [r["body"] for r in one.query("SELECT body FROM notes")] == ["kept"], "the row is there when woken"


@both_engines
@pytest.mark.anyio
async def test_a_subscription_made_after_a_notification_does_not_receive_it(
    two_stores: tuple[StateStore, StateStore],
) -> None:
    one, two = two_stores
    two.notify("approvals", "before")
    with one.subscribe("approvals") as subscription:
        two.notify("approvals", "after")
        assert await _payloads_until(subscription, "after") == ["after"]


@both_engines
def test_a_channel_that_is_not_a_short_word_or_a_payload_too_long_is_refused(store: StateStore) -> None:
    with pytest.raises(ValueError, match="a notification channel is a word"):
        store.notify("approvals; DROP TABLE x", "")
    with pytest.raises(ValueError, match="at most 4000 bytes"):
        store.notify("approvals", "x" * 5000)


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
@pytest.mark.anyio
async def test_a_listening_connection_that_is_terminated_reconnects_and_tells_the_waiters_to_read_again(
    two_stores: tuple[StateStore, StateStore],
) -> None:
    one, two = two_stores
    with one.subscribe("approvals") as subscription:
        two.notify("approvals", "before")
        assert await _payloads_until(subscription, "before") == ["before"]
        ended = two.query(
            "SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity "
            "WHERE application_name = ? AND datname = current_database()",
            (APPLICATION_NAME,),
        )
        assert [r["ended"] for r in ended] == [True]
        missed, seen = 0, []
        with anyio.fail_after(20):
            while "after" not in seen:
                two.notify("approvals", "after")  # lost while the listener is away: sent again on `missed`
                wake = await subscription.wait()
                missed += wake.missed
                seen.extend(wake.payloads)
    assert missed >= 1, "the waiter was told it may have missed notifications"
    relisten = two.query(
        "SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = ? AND datname = current_database()",
        (APPLICATION_NAME,),
    )
    assert relisten[0]["n"] == 1, "one listening connection again"


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
@pytest.mark.anyio
async def test_a_foreign_notify_on_the_stores_postgresql_channel_is_ignored(
    two_stores: tuple[StateStore, StateStore],
) -> None:
    one, two = two_stores
    with one.subscribe("approvals") as subscription:
        for garbage in ("not json", '["approvals"]', '{"approvals": 1}', "[1, 2]"):
            two.execute("SELECT pg_notify(?, ?)", (PG_CHANNEL, garbage))
        two.notify("approvals", "real")
        assert await _payloads_until(subscription, "real") == ["real"]


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
@pytest.mark.anyio
async def test_a_process_with_more_than_1024_files_open_still_gets_its_notifications(store: StateStore) -> None:
    """The listener waits on its socket with a selector: `select()` refuses descriptors past 1023."""
    # lazy: only this test touches the process's file limit
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 2048 <= hard or hard == resource.RLIM_INFINITY:
        resource.setrlimit(resource.RLIMIT_NOFILE, (2048, hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        with store.subscribe("approvals") as subscription:
            store.notify("approvals", "apr_many_files")
            with anyio.fail_after(10):
                wake = await subscription.wait()
    finally:
        for fd in held:
            os.close(fd)
    assert wake.payloads == ("apr_many_files",) and not wake.missed
