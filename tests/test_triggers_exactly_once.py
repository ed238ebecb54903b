"""Many trigger processes on one state store act as one: each schedule slot runs once, and a
webhook with an `Idempotency-Key` runs once. Real processes on each engine: three scheduler
processes ticking 50 slots, and two `toolshell triggers serve` processes answering webhooks."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from _cli_support import toolshell
from _store_support import ENGINES, postgres_server, store_url
from _triggers_support import (
    SLOTS,
    TOKEN,
    claims_rows,
    go,
    raw_post,
    save_script,
    start_workers,
    trigger_runs,
    trigger_servers,
)
from toolshell.errors import ErrorCode, ToolshellError
from toolshell.scripts import ManualClock, RunOutcome, Trigger, TriggerRunner
from toolshell.scripts.claims import KEY_TTL, TriggerClaims, slot_text
from toolshell.store.engines import open_store
from toolshell.store.postgres import PostgresStore

__all__ = ["postgres_server", "store_url"]  # fixtures, imported for pytest
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
def test_three_scheduler_processes_over_fifty_slots_run_each_slot_exactly_once(store_url: str) -> None:
    workers = start_workers(store_url, 3)
    go(workers)
    results = {w.owner: w.result() for w in workers}
    ran = Counter(slot for slots, _ in results.values() for slot in slots)
    calls = sum(c for _, c in results.values())
    rows = claims_rows(store_url)
    print("runs per process:", {owner: len(slots) for owner, (slots, _) in results.items()})
    assert calls == 50
    assert ran == Counter(slot_text(s) for s in SLOTS), "every slot ran, and none twice"
    assert sorted(r["slot"] for r in rows) == sorted(slot_text(s) for s in SLOTS)
    assert {r["claimed_by"] for r in rows} <= set(results)
    assert all(r["exit_code"] == 0 and r["finished_at"] is not None for r in rows)
    for owner, (slots, _) in results.items():
        assert sorted(slots) == sorted(r["slot"] for r in rows if r["claimed_by"] == owner)


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
def test_a_webhook_posted_twice_with_one_idempotency_key_to_two_servers_runs_once(
    store_url: str, tmp_path: Path
) -> None:
    config = save_script(tmp_path, store_url)
    with trigger_servers(config, store_url, 2) as (one, two):
        key = {"Idempotency-Key": "deploy-2026-12-01-a1b2"}
        first = httpx2.post(one.url, json={"text": "abc"}, headers={**AUTH, **key}, timeout=60)
        again = httpx2.post(two.url, json={"text": "abc"}, headers={**AUTH, **key}, timeout=60)
        runs = trigger_runs(store_url)
        (row,) = claims_rows(store_url)
        together = anyio.run(_post_together, [s.url for s in (one, two)], {**AUTH, "Idempotency-Key": "race"})
        runs_after_race = trigger_runs(store_url)
    history = toolshell("triggers", "history", "--config", str(config), env={"TOOLSHELL_STATE_URL": store_url})
    assert first.status_code == 200 and first.json()["stdout"] == "3\n"
    assert "idempotent-replayed" not in first.headers
    assert (again.status_code, again.json()) == (200, first.json()), "the repeat answers with the first outcome"
    assert again.headers["idempotent-replayed"] == "true"
    assert runs == 1
    assert (row["kind"], row["slot"], row["exit_code"]) == ("webhook", "deploy-2026-12-01-a1b2", 0)
    assert row["claimed_by"].endswith(f":{one.proc.pid}")
    statuses = sorted(r.status_code for r in together)
    assert statuses in ([200, 200], [200, 409]), "one runs; the other replays it, or hears it is still going"
    assert runs_after_race == 2
    assert history.returncode == 0
    lines = history.stdout.splitlines()
    assert len(lines) == 2 and lines[1].startswith('deploy               key "deploy-2026-12-01-a1b2" exit 0')


async def _post_together(urls: list[str], headers: dict[str, str]) -> list[httpx2.Response]:
    """POST one request to each server at once."""
    answers: list[httpx2.Response] = []
    async with httpx2.AsyncClient(timeout=60) as http, anyio.create_task_group() as tg:
        for url in urls:

            async def post(url: str = url) -> None:
                answers.append(await http.post(url, json={"text": "ab"}, headers=headers))

            tg.start_soon(post)
    return answers


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
def test_a_webhook_without_an_idempotency_key_runs_every_time_it_is_posted(store_url: str, tmp_path: Path) -> None:
    config = save_script(tmp_path, store_url)
    with trigger_servers(config, store_url, 2) as servers:
        answers = [httpx2.post(s.url, json={"text": "abcd"}, headers=AUTH, timeout=60) for s in (*servers, *servers)]
        runs = trigger_runs(store_url)
    assert [a.status_code for a in answers] == [200] * 4
    assert all(a.json()["stdout"] == "4\n" and "idempotent-replayed" not in a.headers for a in answers)
    assert runs == 4
    assert claims_rows(store_url) == []


BAD_KEYS = {
    "empty": b"",
    "too long": b"k" * 256,
    "a control character": b"deploy\x01x",
    "a delete character": b"deploy\x7fx",
    "a tab": b"deploy\tx",
    "a non-ASCII character": "déploy".encode(),
}


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_a_bad_idempotency_key_gets_one_clear_400_and_runs_nothing(store_url: str, tmp_path: Path) -> None:
    config = save_script(tmp_path, store_url)
    with trigger_servers(config, store_url, 1) as (server,):
        answers = {why: raw_post(server.port, [b"Idempotency-Key: " + key]) for why, key in BAD_KEYS.items()}
        twice = raw_post(server.port, [b"Idempotency-Key: a", b"Idempotency-Key: b"])
        runs = trigger_runs(store_url)
    form = "a key is 1 to 255 printable ASCII characters, e.g. a UUID"
    for why, (status, body) in answers.items():
        assert status == 400, why
        message = body["error"]["message"]
        assert body["error"]["code"] == "invalid_input" and message.endswith(form), (why, message)
        assert "deploy" not in message and "kkkk" not in message, "the key is never echoed"
    assert answers["too long"][1]["error"]["message"].startswith("the Idempotency-Key header is 256 characters long")
    assert answers["a control character"][1]["error"]["message"].startswith(
        "the Idempotency-Key header holds a control or non-ASCII character"
    )
    assert twice == (
        400,
        {
            "error": {
                "code": "invalid_input",
                "message": f"send one Idempotency-Key header, not 2; {form}",
                "retryable": False,
            }
        },
    )
    assert runs == 0
    assert claims_rows(store_url) == []


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
def test_an_idempotency_key_is_held_for_a_day_then_claimed_afresh_on_either_engine(store_url: str) -> None:
    store = open_store(store_url)
    try:
        one, two = TriggerClaims(store, owner="one"), TriggerClaims(store, owner="two")
        assert one.claim_key("deploy", "k", "digest-a") is None
        running = two.claim_key("deploy", "k", "digest-a")
        one.finish("deploy", "webhook", "k", {"exit_code": 0, "stdout": "ok\n", "stderr": "", "tools": None})
        done = two.claim_key("deploy", "k", "digest-a")
        store.execute("UPDATE trigger_claims SET claimed_at = claimed_at - ?", (KEY_TTL.total_seconds() + 1,))
        expired = two.claim_key("deploy", "k", "digest-b")
        (row,) = one.history()
    finally:
        store.close()
    assert running is not None and (running.claimed_by, running.outcome) == ("one", None)
    assert done is not None and done.outcome == {"exit_code": 0, "stdout": "ok\n", "stderr": "", "tools": None}
    assert expired is None, "an expired key is claimed again"
    assert (row["claimed_by"], row["finished_at"], row["exit_code"]) == ("two", None, None)


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
def test_while_the_shared_store_is_unreachable_no_slot_or_keyed_webhook_runs_and_the_loop_goes_on(
    store_url: str, postgres_server: str
) -> None:
    calls: list[str] = []

    async def run(script: str, input: dict[str, Any], source: str) -> RunOutcome:
        calls.append(script)
        return RunOutcome(0)

    store = PostgresStore(store_url, timeout=2)
    triggers = [Trigger("every5", "report", "*/5 * * * *"), Trigger("hook", "deploy", webhook=True)]
    runner = TriggerRunner(triggers, run, ManualClock(SLOTS[0]), TriggerClaims(store))
    _refuse_connections(postgres_server, store_url)

    async def scenario() -> tuple[list[dict[str, RunOutcome]], list[str], ToolshellError, RunOutcome]:
        with anyio.fail_after(30):
            ticks = [await runner.run_due(SLOTS[1]), await runner.run_due(SLOTS[2])]  # cut, then refused
            with pytest.raises(ToolshellError) as refused:
                await runner.fire("hook", {}, key="k")
            ran_by_then = list(calls)
            return ticks, ran_by_then, refused.value, await runner.fire("hook")

    try:
        ticks, ran_by_then, refused, unkeyed = anyio.run(scenario)
    finally:
        store.close()
    assert (ticks, ran_by_then) == ([{}, {}], [])
    assert (refused.code, refused.retryable) == (ErrorCode.UNAVAILABLE, True)
    assert "nothing ran, try again when it is back" in refused.message
    assert unkeyed == RunOutcome(0) and calls == ["deploy"], "a webhook without a key needs no claim"


def _refuse_connections(server: str, url: str) -> None:
    """Make the database refuse every connection and cut the open ones: the store is unreachable."""
    # lazy: psycopg is needed only where PostgreSQL runs
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    name = conninfo_to_dict(url)["dbname"]
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"ALTER DATABASE {name} ALLOW_CONNECTIONS false")
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
