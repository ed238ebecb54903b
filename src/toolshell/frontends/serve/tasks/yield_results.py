"""The results a call under yield-and-wait answers with (`yielding`): its output so far, the
earlier call's rest beside this call's result, the shell still busy, a failure."""

from __future__ import annotations

from typing import Any

import mcp_types as types

from toolshell.errors import ErrorCode, ToolshellError, error_result
from toolshell.frontends.serve.bash_tool import bash_text
from toolshell.store.yields import YieldedRow

STOPPED = "the worker running the earlier call on this shell stopped before it ended; its output after this is lost"


def busy_result(handle: str, earlier: dict[str, Any]) -> types.CallToolResult:
    busy = {"stdout": "", "stderr": "", "shell": handle, "earlier": earlier}
    return result_so_far(busy, note="your script did not run: the shell is still busy with the earlier call")


def failed(message: str) -> types.CallToolResult:
    return error_result(ToolshellError(ErrorCode.UNAVAILABLE, message))


def rest_of(row: YieldedRow, not_replayed: str | None = None) -> dict[str, Any]:
    """What the ended call had not delivered: its last output, exit code and stop report (a call
    whose worker stopped: why it was not run again, when that is known)."""
    rest: dict[str, Any] = {"stdout": row.stdout[row.sent_out :], "stderr": row.stderr[row.sent_err :]}
    if row.result is None:
        note = STOPPED if not_replayed is None else f"{STOPPED}; it is not run again by replay: {not_replayed}"
        return {**rest, "exit_code": 137, "success": False, "note": note}
    body = row.result.get("structuredContent") or {}
    kept = {k: body[k] for k in ("exit_code", "success", "tools", "hints") if k in body}
    return {**rest, **kept} if kept else {**rest, "exit_code": 1, "success": False, "result": row.result}


def with_earlier(result: types.CallToolResult, earlier: dict[str, Any] | None) -> types.CallToolResult:
    """This call's result, with the earlier call's rest beside it."""
    if earlier is None:
        return result
    text = types.TextContent(type="text", text="[earlier call]\n" + bash_text(earlier) + "\n[this call]")
    update: dict[str, Any] = {"content": [text, *result.content]}
    if isinstance(result.structured_content, dict):  # none for a client that shows its model the structure
        update["structured_content"] = {**result.structured_content, "earlier": earlier}
    return result.model_copy(update=update)


def result_so_far(
    body: dict[str, Any], note: str | None = None, earlier: dict[str, Any] | None = None
) -> types.CallToolResult:
    """A result of this call without its own end: the earlier call still running, or this one."""
    if earlier is not None:
        body = {**body, "earlier": earlier}
    if note is not None:
        body = {"exit_code": -1, "success": False, **body, "note": note}
    text = types.TextContent(type="text", text=bash_text(body, handle=True))  # the model needs the shell again
    return types.CallToolResult(content=[text], structured_content=body, is_error=False)
