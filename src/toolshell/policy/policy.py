"""`Policy`: the one place the shell asks whether a call may run.

- `assess(entry, input)` judges a call without running or using anything up: for `tools plan` and
  the before-start check. `input=None` means the input is built while the script runs.
- `check(entry, input, session_id)` judges a real call just before it is made, and uses up a
  one-off grant that covers it.

Both apply, in order: deny rules and static guard rules (`blocked`), `risk.judge` with the tool's
rating, then the person's grants (`needs_approval` becomes `changes`). `assess` and `check` agree,
so a call the plan marks `needs_approval` is the call that would hold the script.
"""

from __future__ import annotations

from typing import Any

import anyio

from toolshell.config import Config
from toolshell.policy.approvals import Approvals
from toolshell.policy.credentials import CredentialScan
from toolshell.policy.guardrails import Guardrails
from toolshell.policy.limits import Limits
from toolshell.policy.rating import Rater, Ratings, make_rater, read_action
from toolshell.policy.risk import (
    BLOCKED,
    CHANGES,
    CHECKED_AT_RUN_TIME,
    NEEDS_APPROVAL,
    READ_ONLY,
    Risk,
    is_unlabeled,
    judge,
    rules_of,
)
from toolshell.registry.entry import ToolEntry
from toolshell.store.protocol import StateStore


class Policy:
    """Risk, ratings, approvals and guardrails for one host.

    Args:
        config: the host config (`[approval]`, `[[guard]]`, `[tools_in_shell] rate_unlabeled_tools`).
        store: where ratings, approval requests and grants are kept.
        rater: who rates unlabeled tools. None: the rater `[approval] rater` names (`make_rater`;
            `rater = "none"` turns ratings off, and so does `rate_unlabeled_tools = false`).

    Raises:
        ConfigError: a bad pattern in `[approval] deny` / `require` or `[[guard]] tool`.
    """

    def __init__(self, config: Config, store: StateStore, rater: Rater | None = None) -> None:
        self.config = config
        self.approval = config.approval
        rules_of(self.approval)  # fail at start-up, not at the first call, on a bad pattern
        self.approvals = Approvals(store, expire_seconds=config.approval.wait_seconds)
        self.guardrails = Guardrails.from_config(config.guard)
        if rater is None:
            rater = make_rater(config.approval)
        enabled = config.tools_in_shell.rate_unlabeled_tools
        self.ratings: Ratings | None = Ratings(store, rater, enabled=enabled) if rater is not None else None
        self.credentials = CredentialScan(config)
        """`[scan]`: credential shapes refused in inputs that leave the machine, masked in results."""
        self.limits = Limits(store, config.limits, config.quotas)
        """`[[limits]]` and `[[quotas]]`, held in the store for the whole fleet."""

    async def rating(self, entry: ToolEntry) -> str | None:
        """The tool's rating (None for a labeled tool or when ratings are off)."""
        return await self.ratings.get(entry) if self.ratings is not None else None

    async def assess(self, entry: ToolEntry, input: dict[str, Any] | None) -> Risk:
        """Judge a call without making it or using up a grant.

        With `input=None` (built at run time) the answer is `checked_at_run_time`, with the tool's
        own level in `tool_risk` (so the agent still learns a tool is read-only); only `blocked`,
        which holds whatever the input, is said as is.
        """
        risk = await self._judge(entry, input)
        if input is None:
            if risk.level == BLOCKED:
                return risk
            message = f"{entry.command} gets its input while the script runs; it is checked then"
            return Risk(CHECKED_AT_RUN_TIME, None, message, tool_risk=risk.level)
        if risk.level == NEEDS_APPROVAL and await anyio.to_thread.run_sync(self._granted, entry, input, False):
            return _granted(entry)
        return risk

    def may_ask(self, entry: ToolEntry) -> bool:
        """Whether any call to `entry` could be judged `needs_approval`, whatever its input, rating or
        grants (grants only take a question away). False when approval is off, or the tool is
        `read_only` or `blocked` by the config alone, or `changes` and labeled (a rating is read only
        for unlabeled tools): the before-start check does not build or validate such a call's input,
        since nothing about it could hold the script."""
        if self.approval.mode == "off":
            return False
        level = judge(entry, self.approval, rating=None).level
        return level == NEEDS_APPROVAL or (level == CHANGES and is_unlabeled(entry))

    async def check(self, entry: ToolEntry, input: dict[str, Any], session_id: str = "") -> Risk:
        """Judge a call about to be made. A valid "always" grant, or a one-off grant for this exact
        call (used up here), turns `needs_approval` into `changes`; `blocked` stays blocked.

        `session_id` is kept for symmetry with `approvals.request`; grants are not per session.
        """
        risk = await self._judge(entry, input)
        if risk.level == NEEDS_APPROVAL and await anyio.to_thread.run_sync(self._granted, entry, input, True):
            return _granted(entry)
        return risk

    def _granted(self, entry: ToolEntry, input: dict[str, Any], use: bool) -> bool:
        """(From a worker thread: the store) an "always" grant covers the call, or a one-off grant
        for this exact call does (used up when `use`)."""
        if self.approvals.is_always(entry):
            return True
        return self.approvals.consume_once(entry, input) if use else self.approvals.has_once(entry, input)

    async def _judge(self, entry: ToolEntry, input: dict[str, Any] | None) -> Risk:
        risk = judge(entry, self.approval, rating=None)
        if risk.level == BLOCKED:
            return risk
        if input is not None and (reason := self.guardrails.denies(entry, input)):
            return Risk(BLOCKED, None, reason)
        if input is not None and (reason := self.credentials.denies(entry, input)):
            return Risk(BLOCKED, "credential", reason)
        if risk.level == READ_ONLY or risk.why == "policy":
            return risk  # a rating cannot change these
        if input is not None and (action := read_action(entry, input)):
            return Risk(READ_ONLY, None, f"{entry.command} action={action} only reads; it runs without asking")
        if self.approval.mode == "off":
            return risk
        return judge(entry, self.approval, rating=await self.rating(entry))


def _granted(entry: ToolEntry) -> Risk:
    return Risk(CHANGES, None, f"{entry.command} was approved by a person; it runs without asking")
