"""Triggers: a schedule or a webhook runs a saved script with no model involved.

The runner knows nothing about shells: it calls `run(script_name, input, "trigger")`, which the
host implements by running the saved script in a fresh shell and recording it in the timeline
like any other run. Trigger runs have nobody to ask, so the host passes `answerer=None`: a call
that needs approval stops the run (`needs_approval` in its report) instead of waiting.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel

from toolshell.config.cron import CronSchedule
from toolshell.config.triggers import TriggerConfig
from toolshell.errors import ErrorCode, ToolshellError, error_line
from toolshell.scripts.clock import Clock, ManualClock, SystemClock

__all__ = [
    "Clock",
    "CronSchedule",
    "ManualClock",
    "RunOutcome",
    "RunScript",
    "SystemClock",
    "Trigger",
    "TriggerConfig",
    "TriggerRunner",
    "tokens_from_env",
]

log = logging.getLogger("toolshell.triggers")


@dataclass
class RunOutcome:
    """What one saved-script run ended with; the webhook answers with `to_dict()`."""

    exit_code: int
    stdout: str = ""
    stderr: str = ""
    tools: dict[str, Any] | None = None
    """The stop report (`done`, `read_only_calls`, `stopped`, …) when the run has one."""

    @property
    def success(self) -> bool:
        return self.exit_code == 0

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"exit_code": self.exit_code, "success": self.success, "stdout": self.stdout}
        if self.stderr:
            out["stderr"] = self.stderr
        if self.tools is not None:
            out["tools"] = self.tools
        return out


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


class TriggerRunner:
    """Runs scheduled triggers when their time comes, and webhook triggers on request.

    Args:
        triggers: The configured triggers.
        run: Runs a saved script and records it; see `RunScript`.
        clock: `SystemClock()` unless given; schedules count from the clock's time at creation.
    """

    def __init__(self, triggers: Iterable[Trigger], run: RunScript, clock: Clock | None = None) -> None:
        self.triggers = {t.name: t for t in triggers}
        self._run = run
        self._clock = clock or SystemClock()
        self._crons = {t.name: c for t in self.triggers.values() if (c := t.cron) is not None}
        since = self._clock.now()
        self._next = {name: cron.next_after(since) for name, cron in self._crons.items()}
        self._running: set[str] = set()

    def next_runs(self) -> dict[str, datetime]:
        """When each scheduled trigger runs next."""
        return dict(self._next)

    def _take_due(self, now: datetime) -> list[Trigger]:
        """The schedules whose time has come, each moved on to its next time after `now`.

        Runs missed while the host was down or asleep collapse into one; a trigger whose
        previous run is still going is skipped so runs of one script never overlap.
        """
        due = []
        for name, at in self._next.items():
            if at <= now:
                self._next[name] = self._crons[name].next_after(now)
                if name in self._running:
                    log.warning("trigger %s: skipped, its previous run is still going", name)
                else:
                    due.append(self.triggers[name])
        return due

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
        """Run every schedule whose time came by `now`, together; their outcomes by trigger name."""
        results: dict[str, RunOutcome] = {}

        async def one(trigger: Trigger) -> None:
            results[trigger.name] = await self._run_one(trigger, dict(trigger.input))

        async with anyio.create_task_group() as tg:
            for trigger in self._take_due(now):
                tg.start_soon(one, trigger)
        return results

    async def fire(self, name: str, input: dict[str, Any] | None = None) -> RunOutcome:
        """Run a webhook trigger now; `input` is merged over the trigger's configured input.

        Raises:
            ToolshellError: `unknown_command` when no webhook trigger has that name.
        """
        trigger = self.triggers.get(name)
        if trigger is None or not trigger.webhook:
            raise ToolshellError(ErrorCode.UNKNOWN_COMMAND, f"no webhook trigger named {name!r}")
        return await self._run_one(trigger, {**trigger.input, **(input or {})})

    async def serve(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run schedules forever; use with `await task_group.start(runner.serve)`; cancel to stop."""
        async with anyio.create_task_group() as tg:
            task_status.started()
            if not self._next:
                await anyio.sleep_forever()
            while True:
                await self._clock.sleep_until(min(self._next.values()))
                await anyio.lowlevel.checkpoint()  # stay cancellable even if a clock returns at once
                for trigger in self._take_due(self._clock.now()):
                    tg.start_soon(self._run_one, trigger, dict(trigger.input))
