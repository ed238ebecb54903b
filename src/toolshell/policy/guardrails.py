"""Guardrails: checks that run before every call (and may rewrite or block it) and after it.

A call from a script goes through them exactly as a direct call does. `before` sees the input after
the guards before it rewrote it; `after` sees the result after the guards before it replaced it.
Both run in list order.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from toolshell.config import GuardConfig
from toolshell.config.patterns import parse_pattern
from toolshell.errors import ErrorCode, ToolshellError
from toolshell.policy.canonical import canonical_json
from toolshell.registry.entry import ToolEntry
from toolshell.registry.linear_regex import linear

if TYPE_CHECKING:  # mcp_types costs a quarter second to import; only type checkers need it here
    from mcp_types import CallToolResult


@dataclass(frozen=True)
class GuardCall:
    """The call a guard looks at."""

    entry: ToolEntry
    input: dict[str, Any]
    session_id: str = ""


class Guardrail(Protocol):
    """One guard. `before` returns a rewritten input or None to keep it, and raises
    `ToolshellError(ErrorCode.DENIED, reason)` to block the call; `after` returns a replacement
    result or None to keep it."""

    async def before(self, call: GuardCall) -> dict[str, Any] | None: ...

    async def after(self, call: GuardCall, result: CallToolResult) -> CallToolResult | None: ...


class RegexGuard:
    """A `[[guard]]` rule: deny calls to tools matching `tool` whose canonical JSON input matches `input`.

    An empty `input` regex matches every input, so the rule denies every call to those tools.
    """

    def __init__(self, config: GuardConfig, place: str = "guard") -> None:
        self.config = config
        self.pattern = parse_pattern(config.tool, f"{place}.tool")
        # A script chooses the input, so match it in linear time; the config is trusted, so a
        # pattern RE2 lacks a feature for (a lookahead) still runs, on Python's `re`.
        self.regex = linear(config.input) or re.compile(config.input)

    def denies(self, entry: ToolEntry, input: dict[str, Any]) -> str | None:
        """The reason this rule denies the call, or None. Pure, so `tools plan` can use it."""
        if self.pattern.matches(entry) and self.regex.search(canonical_json(input)):
            return f"{entry.command}: {self.config.message} (guard rule for {self.config.tool!r})"
        return None

    async def before(self, call: GuardCall) -> dict[str, Any] | None:
        if reason := self.denies(call.entry, call.input):
            raise ToolshellError(ErrorCode.DENIED, reason)
        return None

    async def after(self, call: GuardCall, result: CallToolResult) -> CallToolResult | None:
        return None


class Guardrails:
    """The guards of a host, run in order."""

    def __init__(self, guards: Iterable[Guardrail] = ()) -> None:
        self.guards: list[Guardrail] = list(guards)

    @classmethod
    def from_config(cls, rules: list[GuardConfig]) -> Guardrails:
        """One `RegexGuard` per `[[guard]]` table; a bad tool pattern raises `ConfigError`."""
        return cls(RegexGuard(rule, f"guard[{i}]") for i, rule in enumerate(rules))

    def add(self, guard: Guardrail) -> None:
        """Append a guard; it runs after the ones already there."""
        self.guards.append(guard)

    def denies(self, entry: ToolEntry, input: dict[str, Any]) -> str | None:
        """The first reason a guard that can judge without running (a `RegexGuard`) denies the call."""
        for guard in self.guards:
            check = getattr(guard, "denies", None)
            if check is not None and (reason := check(entry, input)):
                return str(reason)
        return None

    async def before(self, call: GuardCall) -> dict[str, Any]:
        """Run every guard's `before`; returns the input to send. Raises `ToolshellError(DENIED)`."""
        return await self._before(call, self.guards)

    async def rewrite(self, call: GuardCall) -> dict[str, Any]:
        """`before` of the guards that are not static rules: the call path uses this, because
        `Policy` judges the static rules (`denies`) once, on the final input (as `blocked`)."""
        return await self._before(call, [g for g in self.guards if getattr(g, "denies", None) is None])

    async def _before(self, call: GuardCall, guards: list[Guardrail]) -> dict[str, Any]:
        for guard in guards:
            rewritten = await guard.before(call)
            if rewritten is not None:
                if not isinstance(rewritten, dict):
                    raise TypeError(
                        f"guard {type(guard).__name__}.before returned {type(rewritten).__name__}; "
                        "it must return a dict (the new input) or None"
                    )
                call = replace(call, input=rewritten)
        return call.input

    async def after(self, call: GuardCall, result: CallToolResult) -> CallToolResult:
        """Run every guard's `after`; returns the result the script sees."""
        for guard in self.guards:
            replaced = await guard.after(call, result)
            if replaced is not None:
                result = replaced
        return result
