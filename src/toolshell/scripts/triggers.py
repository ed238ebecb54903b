"""Triggers: a schedule or a webhook runs a saved script with no model involved.

The runner knows nothing about shells: it calls `run(script_name, input, "trigger")`, which the
host implements by running the saved script in a fresh shell and recording it in the timeline
like any other run. Trigger runs have nobody to ask, so the host passes `answerer=None`: a call
that needs approval stops the run (`needs_approval` in its report) instead of waiting.

Many processes may run one set of triggers on one store: each run is claimed first
(`scripts.claims`), so a schedule's slot runs in one process only, and a webhook request with an
`Idempotency-Key` runs once. Catch-up: a process runs the slots that come from `CATCH_UP` before
it started on; slots that came earlier, while no process ran, are not run. Slots that came due
while a running process slept (a suspended machine) collapse into the latest of them.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel

from toolshell.config.cron import CronSchedule
from toolshell.config.triggers import TriggerConfig
from toolshell.errors import ErrorCode, ToolshellError, error_line
from toolshell.scripts.claims import Kind, TriggerClaims, request_hash, slot_text
from toolshell.scripts.clock import Clock, ManualClock, SystemClock
from toolshell.store.sqlite import Store

__all__ = [
    "CATCH_UP",
    "Clock",
    "CronSchedule",
    "KeyInUse",
    "ManualClock",
    "RunOutcome",
    "RunScript",
    "SystemClock",
    "Trigger",
    "TriggerClaims",
    "TriggerConfig",
    "TriggerRunner",
    "tokens_from_env",
]

log = logging.getLogger("toolshell.triggers")

CATCH_UP = timedelta(minutes=5)
"""A process that starts this soon after a slot runs it if no process did: a restart across a slot
loses nothing, and a process started long after a slot does not run it late."""


@dataclass
class RunOutcome:
    """What one saved-script run ended with; the webhook answers with `to_dict()`."""

    exit_code: int
    stdout: str = ""
    stderr: str = ""
    tools: dict[str, Any] | None = None
    """The stop report (`done`, `read_only_calls`, `stopped`, …) when the run has one."""
    replayed: bool = False
    """This is the recorded outcome of an earlier run with the same Idempotency-Key; nothing ran."""
    lost: bool = False
    """The process running it died before it ended (`scripts.claims.lost_outcome`)."""

    @property
    def success(self) -> bool:
        return self.exit_code == 0

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"exit_code": self.exit_code, "success": self.success, "stdout": self.stdout}
        if self.stderr:
            out["stderr"] = self.stderr
        if self.tools is not None:
            out["tools"] = self.tools
        if self.lost:
            out["lost"] = True
        return out

    def record(self) -> dict[str, Any]:
        """What the claims table keeps of the outcome; `from_record` reads it back."""
        return {"exit_code": self.exit_code, "stdout": self.stdout, "stderr": self.stderr, "tools": self.tools}

    @classmethod
    def from_record(cls, record: dict[str, Any], *, replayed: bool = False) -> RunOutcome:
        lost = bool(record.get("lost"))
        return cls(record["exit_code"], record["stdout"], record["stderr"], record["tools"], replayed, lost)


class KeyInUse(ToolshellError):
    """A webhook's Idempotency-Key belongs to a run still going (`running`), or to another request."""

    def __init__(self, message: str, *, running: bool) -> None:
        super().__init__(ErrorCode.INVALID_INPUT, message, retryable=running)
        self.running = running


RunScript = Callable[[str, dict[str, Any], str], Awaitable[RunOutcome]]
"""`run(script_name, input, source)`; source is `"trigger"` for every run the runner starts."""


@dataclass(frozen=True)
class Trigger:
    """A runnable trigger. `Trigger.from_config` builds one from a `TriggerConfig`."""

    name: str
    script: str
    schedule: str | None = None
    webhook: bool = False
    input: dict[str, Any] = field(default_factory=dict)
    secret_env: str | None = None
    allow_unauthenticated: bool = False

    @property
    def cron(self) -> CronSchedule | None:
        return CronSchedule.parse(self.schedule) if self.schedule else None

    @classmethod
    def from_config(cls, config: TriggerConfig) -> Trigger:
        return cls(
            config.name,
            config.script,
            config.schedule,
            config.webhook,
            dict(config.input),
            config.secret_env,
            config.allow_unauthenticated,
        )


def tokens_from_env(triggers: Iterable[Trigger], env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The bearer token of each webhook trigger that names `secret_env`, keyed by trigger name.

    Raises:
        ToolshellError: `unavailable` naming the variable when one is unset or empty, and
            `invalid_input` for a webhook with no `secret_env` that does not say
            `allow_unauthenticated = true`, so a webhook never starts open by mistake.
    """
    env = os.environ if env is None else env
    tokens: dict[str, str] = {}
    for t in triggers:
        if t.webhook and not t.secret_env and not t.allow_unauthenticated:
            raise ToolshellError(
                ErrorCode.INVALID_INPUT,
                f"webhook trigger {t.name!r} has no secret_env, so anyone who reaches the port could fire it; "
                f'set secret_env = "HOOK_TOKEN" (and export it), or allow_unauthenticated = true to serve it open',
            )
        if t.webhook and t.secret_env:
            if not env.get(t.secret_env):
                raise ToolshellError(
                    ErrorCode.UNAVAILABLE,
                    f"trigger {t.name!r} takes its webhook token from ${t.secret_env}, which is not set; "
                    f"export {t.secret_env}=… before starting",
                )
            tokens[t.name] = env[t.secret_env]
    return tokens


def _store_failure(e: Exception) -> ToolshellError:
    """A failure of the claims' store as one `unavailable` error, saying that nothing ran."""
    first = e.message if isinstance(e, ToolshellError) else (str(e).strip().splitlines() or [type(e).__name__])[0]
    return ToolshellError(
        ErrorCode.UNAVAILABLE,
        f"the state store could not record the claim ({first}); nothing ran, try again when it is back",
        retryable=True,
    )


class TriggerRunner:
    """Runs scheduled triggers when their time comes, and webhook triggers on request.

    Args:
        triggers: The configured triggers.
        run: Runs a saved script and records it; see `RunScript`.
        clock: `SystemClock()` unless given; schedules count from the clock's time at creation,
            less `CATCH_UP`.
        claims: Where runs are claimed; processes sharing its store run each slot and each
            Idempotency-Key once between them. Unless given, a store of this runner's own.
    """

    def __init__(
        self,
        triggers: Iterable[Trigger],
        run: RunScript,
        clock: Clock | None = None,
        claims: TriggerClaims | None = None,
    ) -> None:
        self.triggers = {t.name: t for t in triggers}
        self._run = run
        self._clock = clock or SystemClock()
        self.claims = claims or TriggerClaims(Store(":memory:"))
        self._crons = {t.name: c for t in self.triggers.values() if (c := t.cron) is not None}
        since = self._clock.now() - CATCH_UP
        self._next = {name: cron.next_after(since) for name, cron in self._crons.items()}
        self._running: set[str] = set()

    def next_runs(self) -> dict[str, datetime]:
        """The next slot each scheduled trigger looks at (one in the past is due)."""
        return dict(self._next)

    def _take_due(self, now: datetime) -> list[tuple[Trigger, datetime]]:
        """The schedules whose time has come, with the slot this process claimed for each; each
        moves on to its first slot after `now`.

        Of the slots that came due since the last look (a process that slept), only the latest
        is claimed. A trigger whose previous run in this process is still going is skipped here
        (another process may claim that slot), so runs of one script in a process never overlap.
        """
        due = []
        for name, at in self._next.items():
            if at > now:
                continue
            cron, slot = self._crons[name], at
            while (later := cron.next_after(slot)) <= now:
                slot = later
            self._next[name] = later
            if name in self._running:
                log.warning("trigger %s: slot %s skipped here, its previous run is still going", name, slot_text(slot))
            elif self._claim(name, slot):
                due.append((self.triggers[name], slot))
        return due

    def _claim(self, name: str, slot: datetime) -> bool:
        try:
            claimed = self.claims.claim_slot(name, slot)
        except Exception as e:  # the store is unreachable: run nothing rather than maybe twice
            message = _store_failure(e).message
            log.warning("trigger %s: slot %s not run, it could not be claimed: %s", name, slot_text(slot), message)
            return False
        if not claimed:
            log.info("trigger %s: slot %s was claimed by another process", name, slot_text(slot))
        return claimed

    async def _run_slot(self, trigger: Trigger, slot: datetime) -> RunOutcome:
        outcome = await self._run_one(trigger, dict(trigger.input))
        self._finish(trigger.name, "schedule", slot_text(slot), outcome)
        return outcome

    def _finish(self, name: str, kind: Kind, slot: str, outcome: RunOutcome) -> None:
        try:
            self.claims.finish(name, kind, slot, outcome.record())
        except Exception as e:  # the run happened; only its line in the history is missing
            log.warning("trigger %s: the outcome of %s could not be recorded in the store: %s", name, slot, e)

    async def _run_one(self, trigger: Trigger, input: dict[str, Any]) -> RunOutcome:
        # One failing run must not stop the others nor the loop: every error becomes an outcome.
        self._running.add(trigger.name)
        try:
            outcome = await self._run(trigger.script, input, "trigger")
        except ToolshellError as e:
            outcome = RunOutcome(1, stderr=error_line(e))
        except Exception as e:
            log.exception("trigger %s: the run of %s failed", trigger.name, trigger.script)
            outcome = RunOutcome(1, stderr=error_line(ToolshellError(ErrorCode.UNAVAILABLE, f"the run failed: {e}")))
        finally:
            self._running.discard(trigger.name)
        log.info("trigger %s: %s exited %d", trigger.name, trigger.script, outcome.exit_code)
        return outcome

    async def run_due(self, now: datetime) -> dict[str, RunOutcome]:
        """Run every schedule whose time came by `now` and whose slot this process claimed,
        together; their outcomes by trigger name."""
        results: dict[str, RunOutcome] = {}

        async def one(trigger: Trigger, slot: datetime) -> None:
            results[trigger.name] = await self._run_slot(trigger, slot)

        async with anyio.create_task_group() as tg:
            for trigger, slot in self._take_due(now):
                tg.start_soon(one, trigger, slot)
        return results

    async def fire(self, name: str, input: dict[str, Any] | None = None, key: str | None = None) -> RunOutcome:
        """Run a webhook trigger now; `input` is merged over the trigger's configured input.

        With an Idempotency-Key `key`, the request runs once across the processes sharing the
        claims' store: a repeat gets the first run's outcome (`replayed`) without running.

        Raises:
            ToolshellError: `unknown_command` when no webhook trigger has that name;
                `unavailable` when the store to claim the key in cannot be reached.
            KeyInUse: the key's first run is still going, or it came with another input.
        """
        trigger = self.triggers.get(name)
        if trigger is None or not trigger.webhook:
            raise ToolshellError(ErrorCode.UNKNOWN_COMMAND, f"no webhook trigger named {name!r}")
        merged = {**trigger.input, **(input or {})}
        if key is None:
            return await self._run_one(trigger, merged)
        digest = request_hash(merged)
        try:
            held = self.claims.claim_key(name, key, digest)
        except Exception as e:
            raise _store_failure(e) from None
        if held is None:
            outcome = await self._run_one(trigger, merged)
            self._finish(name, "webhook", key, outcome)
            return outcome
        if held.request_hash != digest:
            raise KeyInUse(
                "this Idempotency-Key was already used for a request with another body;"
                " send a new key for a new request",
                running=False,
            )
        if held.outcome is None:
            raise KeyInUse(
                "the run for this Idempotency-Key is still going; repeat the request later to get its outcome",
                running=True,
            )
        return RunOutcome.from_record(held.outcome, replayed=True)

    async def serve(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run schedules forever; use with `await task_group.start(runner.serve)`; cancel to stop."""
        async with anyio.create_task_group() as tg:
            task_status.started()
            if not self._next:
                await anyio.sleep_forever()
            while True:
                await self._clock.sleep_until(min(self._next.values()))
                await anyio.lowlevel.checkpoint()  # stay cancellable even if a clock returns at once
                for trigger, slot in self._take_due(self._clock.now()):
                    tg.start_soon(self._run_slot, trigger, slot)
