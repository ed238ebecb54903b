"""Triggers: config validation, tokens, and the runner driven by a manual clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest
from pydantic import ValidationError

from toolshell.errors import ErrorCode, ToolshellError
from toolshell.scripts import ManualClock, RunOutcome, Trigger, TriggerConfig, TriggerRunner, tokens_from_env
from toolshell.scripts.claims import TriggerClaims
from toolshell.scripts.triggers import CATCH_UP
from toolshell.store.sqlite import Store

START = datetime(2025, 1, 1, 10, 7, tzinfo=UTC)


@pytest.fixture
def anyio_backend():
    return "asyncio"


class Recorder:
    """A `run` callback that records each call, fails for named scripts, and signals each run."""

    def __init__(self, fail: dict[str, BaseException] | None = None) -> None:
        self.calls: list[tuple[str, dict[str, Any], str]] = []
        self.fail = fail or {}
        self.ran = anyio.Event()

    async def __call__(self, script: str, input: dict[str, Any], source: str) -> RunOutcome:
        self.calls.append((script, input, source))
        self.ran.set()
        self.ran = anyio.Event()
        if script in self.fail:
            raise self.fail[script]
        return RunOutcome(0, stdout=f"{script} ok\n")


def _error_message(build) -> str:
    with pytest.raises(ValidationError) as info:
        build()
    (error,) = info.value.errors()
    return error["msg"].removeprefix("Value error, ")


# --- config ------------------------------------------------------------------------------------


def test_trigger_config_accepts_a_schedule_and_a_webhook_and_builds_a_trigger():
    config = TriggerConfig.model_validate(
        {"name": "nightly", "script": "triage-prs", "schedule": "0 2 * * *", "webhook": True,
         "input": {"repo": "acme/api"}, "secret_env": "HOOK_TOKEN"}
    )  # fmt: skip
    expected = Trigger("nightly", "triage-prs", "0 2 * * *", True, {"repo": "acme/api"}, "HOOK_TOKEN")
    assert Trigger.from_config(config) == expected


def test_trigger_config_rejects_unknown_keys():
    with pytest.raises(ValidationError) as info:
        TriggerConfig.model_validate({"name": "t", "script": "s", "webhook": True, "cron": "* * * * *"})
    assert info.value.errors()[0]["type"] == "extra_forbidden"


def test_trigger_config_reports_a_bad_schedule_with_the_cron_message():
    message = _error_message(lambda: TriggerConfig(name="t", script="s", schedule="61 * * * *"))
    assert message.startswith("cron field 1 (minute) '61' is out of range 0-59; ")


def test_trigger_config_reports_a_bad_script_name():
    message = _error_message(lambda: TriggerConfig(name="t", script="no spaces", webhook=True))
    assert message.startswith("'no spaces' is not a usable script name")


def test_a_trigger_that_neither_runs_on_a_schedule_nor_by_webhook_is_refused():
    message = _error_message(lambda: TriggerConfig(name="t", script="s"))
    assert message == "trigger 't' needs schedule = \"0 9 * * mon-fri\" or webhook = true"


def test_a_secret_env_without_a_webhook_is_refused():
    message = _error_message(lambda: TriggerConfig(name="t", script="s", schedule="@daily", secret_env="X"))
    assert message == "trigger 't': secret_env applies only to webhooks; add webhook = true"


def test_tokens_come_from_the_named_environment_variables_of_webhook_triggers():
    triggers = [
        Trigger("a", "s", webhook=True, secret_env="A_TOKEN"),
        Trigger("b", "s", webhook=True, allow_unauthenticated=True),
        Trigger("c", "s", schedule="@daily"),
    ]
    assert tokens_from_env(triggers, {"A_TOKEN": "sekrit", "OTHER": "x"}) == {"a": "sekrit"}


@pytest.mark.parametrize("env", [{}, {"A_TOKEN": ""}])
def test_a_missing_token_variable_stops_the_webhooks_from_starting(env):
    with pytest.raises(ToolshellError) as info:
        tokens_from_env([Trigger("a", "s", webhook=True, secret_env="A_TOKEN")], env)
    assert (info.value.code, info.value.message) == (
        ErrorCode.UNAVAILABLE,
        "trigger 'a' takes its webhook token from $A_TOKEN, which is not set; export A_TOKEN=… before starting",
    )


# --- running schedules -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_schedule_runs_once_when_its_time_comes_and_not_again_in_the_same_slot():
    run = Recorder()
    runner = TriggerRunner([Trigger("q", "quarterly", "*/15 * * * *", input={"k": 1})], run, ManualClock(START))
    assert runner.next_runs() == {"q": START.replace(minute=15)}
    assert await runner.run_due(START.replace(minute=14)) == {}
    assert list(await runner.run_due(START.replace(minute=15))) == ["q"]
    assert await runner.run_due(START.replace(minute=15)) == {}
    assert await runner.run_due(START.replace(minute=29, second=59)) == {}
    assert list(await runner.run_due(START.replace(minute=30))) == ["q"]
    assert run.calls == [("quarterly", {"k": 1}, "trigger"), ("quarterly", {"k": 1}, "trigger")]


@pytest.mark.anyio
async def test_runs_missed_while_the_host_was_away_collapse_into_one():
    run = Recorder()
    runner = TriggerRunner([Trigger("q", "s", "*/15 * * * *")], run, ManualClock(START))
    await runner.run_due(START + timedelta(hours=5))
    assert len(run.calls) == 1
    assert runner.next_runs() == {"q": datetime(2025, 1, 1, 15, 15, tzinfo=UTC)}


@pytest.mark.anyio
async def test_a_failing_run_does_not_stop_the_other_due_runs():
    run = Recorder(fail={"boom": RuntimeError("disk on fire"), "refused": ToolshellError(ErrorCode.DENIED, "no")})
    triggers = [Trigger(n, n, "0 11 * * *") for n in ("boom", "fine", "refused")]
    runner = TriggerRunner(triggers, run, ManualClock(START))
    results = await runner.run_due(datetime(2025, 1, 1, 11, 0, tzinfo=UTC))
    assert sorted(c[0] for c in run.calls) == ["boom", "fine", "refused"]
    assert results == {
        "boom": RunOutcome(
            1, stderr='{"error":{"code":"unavailable","message":"the run failed: disk on fire","retryable":false}}\n'
        ),
        "fine": RunOutcome(0, stdout="fine ok\n"),
        "refused": RunOutcome(1, stderr='{"error":{"code":"denied","message":"no","retryable":false}}\n'),
    }


@pytest.mark.anyio
async def test_webhook_only_triggers_never_run_on_a_schedule():
    run = Recorder()
    runner = TriggerRunner([Trigger("hook", "s", webhook=True)], run, ManualClock(START))
    assert runner.next_runs() == {}
    assert await runner.run_due(START + timedelta(days=400)) == {}
    assert run.calls == []


@pytest.mark.anyio
async def test_fire_merges_the_given_input_over_the_triggers_input():
    run = Recorder()
    runner = TriggerRunner([Trigger("h", "s", webhook=True, input={"repo": "a/b", "n": 1})], run, ManualClock(START))
    assert await runner.fire("h", {"n": 2}) == RunOutcome(0, stdout="s ok\n")
    assert run.calls == [("s", {"repo": "a/b", "n": 2}, "trigger")]


@pytest.mark.anyio
@pytest.mark.parametrize("name", ["nope", "scheduled"])
async def test_fire_refuses_a_name_that_is_not_a_webhook_trigger(name):
    runner = TriggerRunner([Trigger("scheduled", "s", "@daily")], Recorder(), ManualClock(START))
    with pytest.raises(ToolshellError) as info:
        await runner.fire(name)
    assert (info.value.code, info.value.message) == (ErrorCode.UNKNOWN_COMMAND, f"no webhook trigger named {name!r}")


@pytest.mark.anyio
async def test_serve_sleeps_until_the_next_schedule_runs_it_and_sleeps_again():
    run = Recorder()
    clock = ManualClock(START)
    runner = TriggerRunner([Trigger("q", "s", "*/15 * * * *"), Trigger("h", "hourly", "0 * * * *")], run, clock)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            await tg.start(runner.serve)
            assert await clock.next_sleeper() == START.replace(minute=15)
            ran = run.ran
            clock.set(START.replace(minute=15))
            await ran.wait()
            assert await clock.next_sleeper() == START.replace(minute=30)
            assert run.calls == [("s", {}, "trigger")]
            clock.set(START.replace(hour=11, minute=0))  # both schedules are due
            assert await clock.next_sleeper() == START.replace(hour=11, minute=15)
            await anyio.wait_all_tasks_blocked()
            tg.cancel_scope.cancel()
    assert sorted(run.calls) == [("hourly", {}, "trigger"), ("s", {}, "trigger"), ("s", {}, "trigger")]


@pytest.mark.anyio
async def test_serve_keeps_going_after_a_run_fails():
    run = Recorder(fail={"s": RuntimeError("boom")})
    clock = ManualClock(START)
    runner = TriggerRunner([Trigger("q", "s", "*/15 * * * *")], run, clock)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            await tg.start(runner.serve)
            for minute in (15, 30):
                ran = run.ran
                clock.set(START.replace(minute=minute))
                await ran.wait()
            tg.cancel_scope.cancel()
    assert len(run.calls) == 2


@pytest.mark.anyio
async def test_serve_skips_a_schedule_whose_previous_run_is_still_going():
    release = anyio.Event()
    calls: list[str] = []
    started = anyio.Event()

    async def slow(script: str, input: dict[str, Any], source: str) -> RunOutcome:
        calls.append(script)
        started.set()
        await release.wait()
        return RunOutcome(0)

    clock = ManualClock(START)
    runner = TriggerRunner([Trigger("q", "s", "*/15 * * * *")], slow, clock)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            await tg.start(runner.serve)
            clock.set(START.replace(minute=15))
            await started.wait()
            clock.set(START.replace(minute=30))
            assert await clock.next_sleeper() == START.replace(minute=45)
            await anyio.wait_all_tasks_blocked()  # a second run, had one been started, would be waiting now
            assert calls == ["s"]
            release.set()
            tg.cancel_scope.cancel()
    assert calls == ["s"]


@pytest.mark.anyio
async def test_serve_without_schedules_reports_started_and_waits_to_be_cancelled():
    runner = TriggerRunner([Trigger("h", "s", webhook=True)], Recorder(), ManualClock(START))
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            await tg.start(runner.serve)
            tg.cancel_scope.cancel()


# --- claims: many runners on one store ---------------------------------------------------------


def _claimed(store: Store) -> list[tuple[str, str]]:
    return [
        (r["slot"], r["claimed_by"]) for r in store.query("SELECT slot, claimed_by FROM trigger_claims ORDER BY slot")
    ]


@pytest.mark.anyio
async def test_two_runners_on_one_store_run_a_slot_once_whatever_moment_each_looks_at_it():
    store, one, two = Store(":memory:"), Recorder(), Recorder()
    trigger = Trigger("q", "s", "*/15 * * * *")
    first = TriggerRunner([trigger], one, ManualClock(START), TriggerClaims(store, owner="one"))
    second = TriggerRunner([trigger], two, ManualClock(START), TriggerClaims(store, owner="two"))
    assert list(await second.run_due(START.replace(minute=29, second=59))) == ["q"]
    assert await first.run_due(START.replace(minute=15, second=1)) == {}, "the 10:15 slot is taken, not 'now'"
    assert list(await first.run_due(START.replace(minute=30, second=0))) == ["q"]
    assert await second.run_due(START.replace(minute=44)) == {}
    assert (len(one.calls), len(two.calls)) == (1, 1)
    assert _claimed(store) == [("2025-01-01T10:15:00Z", "two"), ("2025-01-01T10:30:00Z", "one")]


@pytest.mark.anyio
async def test_a_runner_started_soon_after_a_slot_no_process_ran_runs_it_and_one_started_later_does_not():
    store, run = Store(":memory:"), Recorder()
    trigger = Trigger("q", "s", "*/15 * * * *")
    late = START.replace(minute=15) + CATCH_UP + timedelta(seconds=1)
    soon = TriggerRunner([trigger], run, ManualClock(START.replace(minute=19)), TriggerClaims(store))
    later = TriggerRunner([trigger], run, ManualClock(late), TriggerClaims(Store(":memory:")))
    assert soon.next_runs() == {"q": START.replace(minute=15)}
    assert list(await soon.run_due(START.replace(minute=19))) == ["q"]
    assert later.next_runs() == {"q": START.replace(minute=30)}
    assert await later.run_due(late) == {}
    assert _claimed(store)[0][0] == "2025-01-01T10:15:00Z"


@pytest.mark.anyio
async def test_a_runner_that_slept_through_slots_claims_only_the_latest_of_them():
    store, run = Store(":memory:"), Recorder()
    runner = TriggerRunner([Trigger("q", "s", "*/15 * * * *")], run, ManualClock(START), TriggerClaims(store))
    await runner.run_due(START + timedelta(hours=5))
    assert [slot for slot, _ in _claimed(store)] == ["2025-01-01T15:00:00Z"]


@pytest.mark.anyio
async def test_a_finished_scheduled_run_records_its_outcome_in_the_history():
    store = Store(":memory:")
    claims = TriggerClaims(store, owner="me")
    runner = TriggerRunner([Trigger("q", "s", "*/15 * * * *")], Recorder(), ManualClock(START), claims)
    await runner.run_due(START.replace(minute=15))
    (row,) = claims.history()
    assert {k: row[k] for k in ("trigger_name", "kind", "slot", "claimed_by", "exit_code")} == {
        "trigger_name": "q", "kind": "schedule", "slot": "2025-01-01T10:15:00Z", "claimed_by": "me", "exit_code": 0,
    }  # fmt: skip
    assert row["finished_at"] >= row["claimed_at"]
