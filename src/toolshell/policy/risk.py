"""The risk of one call: what a tool declares, the approval config, and a rating. Pure.

How a call is judged (DESIGN §5), in this order:

1. A `[approval] deny` pattern that names the tool: `blocked`, in every mode.
2. Mode `off`: nothing asks. A read-only tool is `read_only`, everything else `changes`.
3. A `[approval] require` pattern: `needs_approval` (why `policy`). An explicit rule about a tool
   wins over what the tool says about itself, so it applies to read-only tools too.
4. A tool that declares `readOnlyHint: true` (and is trusted): `read_only`. Read-only never asks.
5. A labeled tool (declares at least one of readOnlyHint / destructiveHint / openWorldHint) is
   read with the MCP spec defaults for a tool that is not read-only: `destructiveHint` true,
   `openWorldHint` true. Destructive asks (why `destructive`), else an open-world writer asks
   (why `open_world`), else it is `changes` — or, in `strict`, asks (why `mutating`).
6. An unlabeled tool declares nothing, so the spec defaults are not applied (the seed: such tools
   "are judged by what they declare, which is nothing, so in normal mode they run without
   asking"). Rated `changes`: asks (why `rated_changes`). Not rated, or rated `read_only`:
   `changes` in `normal`, asks (why `mutating`) in `strict`. A rating never makes a call
   `read_only`: a rating only ever adds a question.

Untrusted tools (`trusted = false`) are judged as unlabeled: their read-only claim, and any claim
that would spare a question (`destructiveHint: false`, `openWorldHint: false`), is not believed.
A claim that adds a question (`destructiveHint: true`, `openWorldHint: true`) costs the server
nothing to make falsely, so it is believed.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from toolshell.config import ApprovalConfig
from toolshell.config.patterns import ToolPattern, first_match, parse_patterns
from toolshell.registry.entry import ToolEntry

READ_ONLY = "read_only"
CHANGES = "changes"
NEEDS_APPROVAL = "needs_approval"
BLOCKED = "blocked"
CHECKED_AT_RUN_TIME = "checked_at_run_time"
LEVELS = (READ_ONLY, CHANGES, NEEDS_APPROVAL, BLOCKED, CHECKED_AT_RUN_TIME)
WHYS = ("destructive", "open_world", "mutating", "policy", "rated_changes", "credential")

_HINTS = ("readOnlyHint", "destructiveHint", "openWorldHint")
_ASK = "a person must approve this call before it runs"


@dataclass(frozen=True)
class Risk:
    """The judgement of one call.

    Attributes:
        level: one of `LEVELS`.
        why: for `needs_approval`, the reason the approval card gives (one of `WHYS`); for `blocked`,
            "credential" when the input holds one that would leave the host; else None.
        message: one sentence a person (or the agent) can act on.
    """

    level: str
    why: str | None = None
    message: str = ""
    tool_risk: str | None = None
    """For `checked_at_run_time`: the tool's own level (e.g. `read_only`), whatever its input."""

    @property
    def asks(self) -> bool:
        """True when the call needs a person's answer before it runs."""
        return self.level == NEEDS_APPROVAL


def is_unlabeled(entry: ToolEntry) -> bool:
    """True for a tool judged as declaring nothing: untrusted, or none of the three hints declared.

    These are the tools a rater is asked about. `idempotentHint` alone says nothing about whether a
    tool changes things, so it does not count as a label.
    """
    return not entry.trusted or not any(h in entry.annotations for h in _HINTS)


@lru_cache(maxsize=64)
def _rules(deny: tuple[str, ...], require: tuple[str, ...]) -> tuple[list[ToolPattern], list[ToolPattern]]:
    return parse_patterns(list(deny), "approval.deny"), parse_patterns(list(require), "approval.require")


def rules_of(approval: ApprovalConfig) -> tuple[list[ToolPattern], list[ToolPattern]]:
    """The parsed `(deny, require)` patterns; raises `ConfigError` naming a bad pattern."""
    return _rules(tuple(approval.deny), tuple(approval.require))


def judge(entry: ToolEntry, approval: ApprovalConfig, *, rating: str | None) -> Risk:
    """Judge a call to `entry` under `approval`, given the tool's stored rating (or None).

    Args:
        entry: the tool called.
        approval: the `[approval]` config (mode, deny and require patterns).
        rating: `"changes"` or `"read_only"` for a rated unlabeled tool; None when not rated.
            Ignored for labeled, trusted tools (they are never rated).

    Returns:
        The `Risk`; `checked_at_run_time` is never returned here (see `Policy.assess`).
    """
    deny, require = rules_of(approval)
    cmd = entry.command
    if rule := first_match(deny, entry):
        return Risk(
            BLOCKED,
            None,
            f"{cmd} is blocked by the approval deny rule {rule.text!r} and cannot run; "
            "only the person can lift it, by changing [approval] deny in the config",
        )
    read_only = entry.trusted and entry.annotations.get("readOnlyHint") is True
    if approval.mode == "off":
        if read_only:
            return _read_only(cmd)
        return Risk(CHANGES, None, f"{cmd} may change things; approval mode is off, so it runs without asking")
    if rule := first_match(require, entry):
        return Risk(
            NEEDS_APPROVAL, "policy", f"{cmd} needs approval under the rule {rule.text!r} in [approval] require; {_ASK}"
        )
    if read_only:
        return _read_only(cmd)
    strict = approval.mode == "strict"
    if is_unlabeled(entry):
        return _judge_unlabeled(entry, rating, strict)
    return _judge_labeled(cmd, entry.annotations, strict)


def _read_only(cmd: str) -> Risk:
    return Risk(READ_ONLY, None, f"{cmd} only reads (it declares readOnlyHint); it runs without asking")


def _judge_labeled(cmd: str, hints: dict[str, Any], strict: bool) -> Risk:
    # MCP spec defaults for a tool that is not read-only: destructive and open-world unless it says not.
    if hints.get("destructiveHint", True) is not False:
        said = (
            "declares destructiveHint"
            if hints.get("destructiveHint") is True
            else "does not declare destructiveHint: false, which MCP reads as destructive"
        )
        return Risk(NEEDS_APPROVAL, "destructive", f"{cmd} may delete or overwrite data (it {said}); {_ASK}")
    if hints.get("openWorldHint", True) is not False:
        return Risk(
            NEEDS_APPROVAL,
            "open_world",
            f"{cmd} changes things outside this host (it does not declare openWorldHint: false); {_ASK}",
        )
    if strict:
        return _mutating(cmd)
    return Risk(
        CHANGES, None, f"{cmd} changes things but is neither destructive nor open-world; it runs without asking"
    )


def _judge_unlabeled(entry: ToolEntry, rating: str | None, strict: bool) -> Risk:
    cmd = entry.command
    hints = entry.annotations
    if not entry.trusted:
        # Untrusted: only claims that add a question are believed.
        if hints.get("destructiveHint") is True:
            return Risk(NEEDS_APPROVAL, "destructive", f"{cmd} declares it may delete or overwrite data; {_ASK}")
        if hints.get("openWorldHint") is True:
            return Risk(NEEDS_APPROVAL, "open_world", f"{cmd} declares it changes things outside this host; {_ASK}")
    unsaid = "declares nothing about its risk" if entry.trusted else "is from a server not trusted to say its risk"
    if rating == CHANGES:
        return Risk(
            NEEDS_APPROVAL,
            "rated_changes",
            f"{cmd} {unsaid} and only looks like it changes things (it was rated); {_ASK}",
        )
    if strict:
        return _mutating(cmd)
    return Risk(CHANGES, None, f"{cmd} {unsaid}; it may change things, and in normal mode it runs without asking")


def _mutating(cmd: str) -> Risk:
    return Risk(NEEDS_APPROVAL, "mutating", f"{cmd} is not read-only and approval mode is strict; {_ASK}")
