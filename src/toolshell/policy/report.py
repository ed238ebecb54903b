"""The stop report: what a script did through `tools`, for the `tools` key of the `bash` result.

The shell records every call a script makes. The report appears when the script stopped (a call
needed approval, the call limit, a call held before the script started), or when it exited with an
error after something may have changed (seed 000, "Approvals"). A script that succeeded, or that
only read, leaves no report: its own output says what it did.

    {"done": [{"tool", "input", "ok", "result"}, …],   # every call that may have changed something
     "read_only_calls": 3,                              # read-only calls are only counted
     "stopped": {"reason", "approval", "call", "request_id"?, "before_start"?},
     "not_reached": "the stopped call and everything after it; write a new script for the rest"}

A `done` entry's input and result are bounded previews (`preview_value`): long strings are cut
with their length said, long lists and objects keep their first items, so what a script wrote
(a file's whole content, say) never comes back to the model whole. The timeline keeps each
call's input preview for people (`toolshell timeline`).
"""

from __future__ import annotations

import json
from typing import Any

from toolshell.policy.risk import READ_ONLY

NOT_REACHED = "the stopped call and everything after it; write a new script for the rest"
PREVIEW_CHARS = 300
"""The longest `done` input or result, as JSON: the report must stay small for the model."""
STRING_CHARS = 80
"""A string in a preview keeps this many characters, then says how many more there were."""
ITEMS = 8
"""A list or object in a preview keeps this many items, then says how many more there were."""


def preview_value(value: Any, limit: int = PREVIEW_CHARS) -> Any:
    """`value` as a bounded preview: itself when its JSON fits in `limit` characters; else the same
    shape with strings, lists and objects cut (each cut says what it left out); else, when even
    that is too long, the first `limit` characters of its JSON as one string."""
    if _length(value) <= limit:
        return value
    shaped = _shaped(value, 0)
    if _length(shaped) <= limit:
        return shaped
    text = json.dumps(shaped, ensure_ascii=False, default=str)
    return text[:limit] + f"… [{len(text) - limit:,} more characters]"


def _length(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, default=str))


def _shaped(value: Any, depth: int) -> Any:
    if isinstance(value, str):
        if len(value) <= STRING_CHARS:
            return value
        return value[:STRING_CHARS] + f"… [{len(value):,} characters]"
    if depth >= 3 and isinstance(value, dict | list) and value:
        return f"[{'an object' if isinstance(value, dict) else 'a list'} of {len(value):,} items]"
    if isinstance(value, list):
        kept = [_shaped(v, depth + 1) for v in value[:ITEMS]]
        return kept + ([f"[{len(value) - ITEMS:,} more items]"] if len(value) > ITEMS else [])
    if isinstance(value, dict):
        items = list(value.items())
        out = {str(k): _shaped(v, depth + 1) for k, v in items[:ITEMS]}
        if len(items) > ITEMS:
            out["…"] = f"[{len(items) - ITEMS:,} more keys]"
        return out
    return value


class ScriptReport:
    """Collects a script's calls as it runs, and renders the report."""

    def __init__(self) -> None:
        self.done: list[dict[str, Any]] = []
        self.read_only_calls = 0
        self.stopped: dict[str, Any] | None = None

    def record(self, command: str, input: dict[str, Any], risk_level: str, ok: bool, result: Any) -> None:
        """Record a call that was made (whether it succeeded or failed).

        Args:
            command: how the script wrote the tool, e.g. `tools linear create-issue`.
            input: the input sent.
            risk_level: the call's `Risk.level`; `read_only` calls are only counted.
            ok: False when the tool ran and failed.
            result: the result as the script saw it (parsed JSON, or text).
        """
        if risk_level == READ_ONLY:
            self.read_only_calls += 1
            return
        self.done.append({"tool": command, "input": preview_value(input), "ok": ok, "result": preview_value(result)})

    def stop(
        self,
        reason: str,
        call: dict[str, Any],
        approval: str | None = None,
        before_start: bool = False,
        request_id: str | None = None,
    ) -> None:
        """Record why the script stopped; the first stop wins (nothing after it ran).

        Args:
            reason: an error code: `needs_approval`, `call_limit`, ...
            call: the call not made, `{"tool": "tools github delete-branch", "input": {...}}`.
            approval: `"requested"` when a person was asked; None otherwise (e.g. the call limit).
            before_start: True when the call was held before the script started.
            request_id: the approval request a person answers (`toolshell approvals grant <id>`).
        """
        if self.stopped is not None:
            return
        self.stopped = {"reason": reason, "approval": approval, "call": call}
        if request_id is not None:
            self.stopped["request_id"] = request_id
        if before_start:
            self.stopped["before_start"] = True

    @property
    def changed(self) -> bool:
        """True when a call that may have changed something was made."""
        return bool(self.done)

    def failed_after_changes(self) -> bool:
        """True when a script that exits with an error should carry the report: it changed something
        and did not stop (a stopped script always carries it)."""
        return self.stopped is None and self.changed

    def to_json(self, exit_code: int) -> dict[str, Any] | None:
        """The report of a script that ended with `exit_code`: None when nothing stopped it and it
        either succeeded (exit 0) or changed nothing."""
        if self.stopped is None and (exit_code == 0 or not self.done):
            return None
        out: dict[str, Any] = {"done": list(self.done), "read_only_calls": self.read_only_calls}
        if self.stopped is not None:
            out["stopped"] = self.stopped
            out["not_reached"] = NOT_REACHED
        return out
