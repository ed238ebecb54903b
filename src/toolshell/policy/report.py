"""The stop report: what a script did through `tools`, for the `tools` key of the `bash` result.

The shell records every call a script makes. The report appears when the script stopped (a call
needed approval, the call limit, a call held before the script started) and whenever something may
have changed; a script that only read leaves no report:

    {"done": [{"tool", "input", "ok", "result"}, …],   # every call that may have changed something
     "read_only_calls": 3,                              # read-only calls are only counted
     "stopped": {"reason", "approval", "call", "request_id"?, "before_start"?},
     "not_reached": "the stopped call and everything after it; write a new script for the rest"}
"""

from __future__ import annotations

import json
from typing import Any

from toolshell.policy.risk import READ_ONLY

NOT_REACHED = "the stopped call and everything after it; write a new script for the rest"
RESULT_PREVIEW_CHARS = 2000
"""A `done` result longer than this (as JSON) is cut: the report must stay small for the model."""


def _preview(result: Any) -> Any:
    text = json.dumps(result, ensure_ascii=False, default=str)
    if len(text) <= RESULT_PREVIEW_CHARS:
        return result
    return text[:RESULT_PREVIEW_CHARS] + f"… [{len(text) - RESULT_PREVIEW_CHARS} more characters not shown]"


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
        self.done.append({"tool": command, "input": input, "ok": ok, "result": _preview(result)})

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

    def to_json(self) -> dict[str, Any] | None:
        """The report, or None when nothing stopped and nothing changed."""
        if self.stopped is None and not self.done:
            return None
        out: dict[str, Any] = {"done": list(self.done), "read_only_calls": self.read_only_calls}
        if self.stopped is not None:
            out["stopped"] = self.stopped
            out["not_reached"] = NOT_REACHED
        return out
