"""Rate limits (`[[limits]]`) and daily quotas (`[[quotas]]`), held in the shared store.

Each limit is a generic cell rate algorithm (GCRA): one row per counter holds the theoretical
arrival time `tat`; a call at `now` is admitted when `max(tat, now) + T - burst·T <= now`
(`T = 60 / per_minute`), and then `tat` moves on by `T`. The check and the update are one
`INSERT … ON CONFLICT DO UPDATE … RETURNING` statement read by the store's clock, so every worker
on the store holds the same limit (a fleet's limit, not a worker's) at one round trip a rule, and
no two workers can both take the last place. A quota is one row per caller and UTC day, counted up
after each call.

Nothing here runs unless a rule is configured: without `[[limits]]` and `[[quotas]]` a call pays
one empty-list test.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from toolshell.config.operator import LimitRule, QuotaRule, caller_matches
from toolshell.config.patterns import Named, parse_pattern
from toolshell.errors import ConfigError
from toolshell.store.dialect import now_expression
from toolshell.store.protocol import StateStore

STEPS = [
    "CREATE TABLE IF NOT EXISTS rate_limits (key TEXT PRIMARY KEY, tat DOUBLE PRECISION NOT NULL, ok INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS quota_usage (caller TEXT NOT NULL, day TEXT NOT NULL, calls BIGINT NOT NULL, "
    "result_bytes BIGINT NOT NULL, PRIMARY KEY (caller, day))",
]
_LOCAL = "-"
"""The counter key of a call with no authenticated caller (the machine's own user)."""


@dataclass(frozen=True)
class Refused:
    """A call over a limit or a quota: which, and when to try again."""

    name: str
    retry_after: float
    """Seconds until the call would be admitted."""
    message: str
    quota: int
    """The `RateLimit-Policy` quota (`q`): calls a window admits."""
    window: int
    """The window in seconds (`w`)."""

    @property
    def retry_after_seconds(self) -> int:
        """Whole seconds, never 0 (a client that retries at once is refused again)."""
        return max(1, math.ceil(self.retry_after))

    def headers(self) -> dict[str, str]:
        """`Retry-After` and the IETF draft's `RateLimit-Policy` / `RateLimit` fields."""
        wait = self.retry_after_seconds
        return {
            "Retry-After": str(wait),
            "RateLimit-Policy": f'"{self.name}";q={self.quota};w={self.window}',
            "RateLimit": f'"{self.name}";r=0;t={wait}',
        }


class Limits:
    """The configured limits and quotas, checked against the store.

    Args:
        store: the state store every worker shares.
        limits: the `[[limits]]` rules.
        quotas: the `[[quotas]]` rules.
    """

    def __init__(self, store: StateStore, limits: Sequence[LimitRule], quotas: Sequence[QuotaRule]) -> None:
        names = [rule.name for rule in limits]
        if len(set(names)) != len(names):
            twice = sorted({n for n in names if names.count(n) > 1})
            raise ConfigError([("limits", f"two limits are named {', '.join(twice)}; give each its own name")])
        self.store, self.quotas = store, list(quotas)
        self.shell_rules = [r for r in limits if r.applies_to == "shell_calls"]
        nested = [r for r in limits if r.applies_to == "nested_calls"]
        self.nested_rules = [(r, parse_pattern(r.tool) if r.tool else None) for r in nested]
        if limits or quotas:
            store.migrate("limits", STEPS)
        now = now_expression(store.engine)
        base = f"(CASE WHEN rate_limits.tat > {now} THEN rate_limits.tat ELSE {now} END)"
        admitted = f"{base} + ? - ? <= {now}"
        self._gcra = (
            f"INSERT INTO rate_limits (key, tat, ok) VALUES (?, {now} + ?, 1) ON CONFLICT (key) DO UPDATE SET "
            f"ok = CASE WHEN {admitted} THEN 1 ELSE 0 END, "
            f"tat = CASE WHEN {admitted} THEN {base} + ? ELSE rate_limits.tat END "
            f"RETURNING tat, ok, {now} AS now"
        )

    def __bool__(self) -> bool:
        return bool(self.shell_rules or self.nested_rules or self.quotas)

    def admit_shell_call(self, caller: str | None) -> Refused | None:
        """Count one `bash` call of `caller` against its limits and quota; the first refusal, or None."""
        for rule in self.shell_rules:
            if caller_matches(rule.caller, caller) and (refused := self._take(rule, caller, "")) is not None:
                return refused
        return self._quota(caller)

    def admit_nested_call(self, caller: str | None, tool: Named) -> Refused | None:
        """Count one `tools` call of `caller` to `tool`; the first refusal, or None."""
        for rule, pattern in self.nested_rules:
            if not caller_matches(rule.caller, caller) or (pattern is not None and not pattern.matches(tool)):
                continue
            if (refused := self._take(rule, caller, f"{tool.server or ''}:{tool.name}")) is not None:
                return refused
        return None

    def count_result(self, caller: str | None, result_bytes: int) -> None:
        """Add one answered `bash` call and the bytes of its result to the caller's day."""
        if not any(caller_matches(q.caller, caller) for q in self.quotas):
            return
        self.store.execute(
            "INSERT INTO quota_usage (caller, day, calls, result_bytes) VALUES (?, ?, 1, ?) "
            "ON CONFLICT (caller, day) DO UPDATE SET calls = quota_usage.calls + 1, "
            "result_bytes = quota_usage.result_bytes + ?",
            (caller or _LOCAL, _today(), result_bytes, result_bytes),
        )

    def usage(self, day: str | None = None) -> list[dict[str, int | str]]:
        """Each caller's calls and result bytes on `day` (default: today, UTC), most calls first."""
        if not self.quotas:
            return []
        rows = self.store.query(
            "SELECT caller, calls, result_bytes FROM quota_usage WHERE day = ? ORDER BY calls DESC, caller",
            (day or _today(),),
        )
        return [{"caller": r["caller"], "calls": int(r["calls"]), "result_bytes": int(r["result_bytes"])} for r in rows]

    def _take(self, rule: LimitRule, caller: str | None, tool: str) -> Refused | None:
        every = 60.0 / rule.per_minute
        burst = rule.allowed_at_once
        who = (caller or _LOCAL) if rule.per == "caller" else "*"
        key = f"{rule.name}|{who}|{tool}" if rule.tool is not None and rule.per == "caller" else f"{rule.name}|{who}"
        span = burst * every
        [row] = self.store.query(self._gcra, (key, every, every, span, every, span, every))
        if int(row["ok"]):
            return None
        wait = float(row["tat"]) + every - span - float(row["now"])
        whom = f"caller {caller}" if rule.per == "caller" and caller else "every caller"
        message = (
            f"rate limited by [[limits]] {rule.name!r}: {rule.per_minute:g} calls a minute "
            f"({burst} at once) for {whom}; retry in {max(1, math.ceil(wait))} s"
        )
        return Refused(rule.name, max(wait, 0.0), message, quota=max(1, round(rule.per_minute)), window=60)

    def _quota(self, caller: str | None) -> Refused | None:
        for quota in self.quotas:
            if not caller_matches(quota.caller, caller):
                continue
            rows = self.store.query(
                "SELECT calls, result_bytes FROM quota_usage WHERE caller = ? AND day = ?", (caller or _LOCAL, _today())
            )
            calls, used = (int(rows[0]["calls"]), int(rows[0]["result_bytes"])) if rows else (0, 0)
            over = (quota.calls_per_day is not None and calls >= quota.calls_per_day) or (
                quota.result_bytes_per_day is not None and used >= quota.result_bytes_per_day
            )
            if over:
                wait = _seconds_to_midnight()
                what = f"{calls} calls and {used} bytes of results today"
                message = (
                    f"daily quota of [[quotas]] reached for caller {caller or 'local'} ({what}); it resets at 00:00 UTC"
                )
                limit = quota.calls_per_day if quota.calls_per_day is not None else calls
                return Refused("daily", wait, message, quota=limit, window=86_400)
        return None


def render_usage(usage: list[dict[str, int | str]]) -> str:
    """Today's quota use per caller, as `toolshell stats` prints it under its table."""
    lines = ["", "Daily quotas (today, UTC): calls and bytes of results per caller"]
    lines += [f"  {row['caller']:<32} {row['calls']:>8} calls {row['result_bytes']:>12} bytes" for row in usage]
    if not usage:
        lines.append("  (no calls counted today)")
    return "\n".join(lines) + "\n"


def _today() -> str:
    return datetime.now(UTC).date().isoformat()


def _seconds_to_midnight() -> float:
    now = datetime.now(UTC)
    midnight = datetime.combine(now.date() + timedelta(days=1), datetime.min.time(), UTC)
    return (midnight - now).total_seconds()


__all__ = ["STEPS", "Limits", "Refused", "render_usage"]
