"""A claim ended as lost stays lost and is never run again: a late finish of the process that
held it does not overwrite it, a schedule's slot is not claimed twice (the next slot runs), and
an Idempotency-Key's answer belongs to its webhook alone (`scripts.claims`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from toolshell.scripts.claims import LOST_EXIT, TriggerClaims
from toolshell.store.engines import open_store
from toolshell.store.workers import Workers

SLOT = datetime(2026, 12, 1, 3, tzinfo=UTC)


def test_a_lost_claim_keeps_its_outcome_its_slot_runs_never_again_and_its_key_is_its_webhooks(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "state.db"))
    try:
        workers = Workers(store, heartbeat_seconds=1.0)
        workers.register("worker-a")
        held = TriggerClaims(store, "host-a:1", workers=workers, worker="worker-a")
        assert held.claim_slot("nightly", SLOT)
        assert held.claim_key("deploy", "key-1", "digest") is None
        workers.forget("worker-a")  # taken for dead by another worker
        judge = TriggerClaims(store, "host-b:2", workers=workers, worker="worker-b")
        assert judge.end_lost() == 2
        held.finish("nightly", "schedule", "2026-12-01T03:00:00Z", {"exit_code": 0, "stdout": "late"})
        held.finish("deploy", "webhook", "key-1", {"exit_code": 0, "stdout": "late"})
        rows = {r["slot"]: (r["exit_code"], r["ended_by"]) for r in judge.history()}
        assert rows == {"2026-12-01T03:00:00Z": (LOST_EXIT, "worker_lost"), "key-1": (LOST_EXIT, "worker_lost")}
        assert not judge.claim_slot("nightly", SLOT)  # never twice
        assert judge.claim_slot("nightly", SLOT + timedelta(days=1))  # the next slot runs
        answer = judge.claim_key("deploy", "key-1", "digest")
        assert answer is not None and answer.outcome is not None and answer.outcome["exit_code"] == LOST_EXIT
        assert judge.claim_key("release", "key-1", "digest") is None  # another webhook's key is its own
    finally:
        store.close()
