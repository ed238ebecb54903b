"""The results of `bash` calls in which nothing ran, or ran and failed, in a shell by handle
(`toolshell.shells`): each says what happened to the shell and what to do next."""

from __future__ import annotations

from toolshell.errors import ErrorCode, ToolshellError, error_line
from toolshell.result import RunResult


def gone(asked: str, new: str) -> RunResult:
    err = ToolshellError(
        ErrorCode.INVALID_INPUT,
        f"the shell {asked[:12]}… is gone (idle past [serve] shell_idle_seconds, dropped past "
        "max_shells_per_caller, or not yours); nothing ran. Run the script again in the new shell "
        f"{new}, setting up what it needs (files, cd) first",
    )
    return RunResult(1, "", error_line(err), shell=new, shell_note=err.message)


def unreadable(asked: str, new: str, why: str) -> RunResult:
    err = ToolshellError(
        ErrorCode.UNAVAILABLE,
        f"the shell {asked[:12]}… could not be opened: {why}; nothing ran. Run the script again in the new shell {new}",
    )
    return RunResult(1, "", error_line(err), shell=new, shell_note=err.message)


def full(handle: str, held: int, live_bytes: int, own: int, past_share: bool, callers: int) -> RunResult:
    """Whose shells hold the budget: the caller's own (`own` bytes) past its share, or others' in calls."""
    if past_share:
        whose = (
            f"this caller's own shells hold {own} bytes of it, more than its share with "
            f"{callers} callers holding live shells, and its others are running calls"
        )
    else:
        whose = f"{held - own} bytes of it are held by other callers' shells that are running calls"
    err = ToolshellError(
        ErrorCode.UNAVAILABLE,
        f"this worker's live shells hold {held} bytes of files, past [serve] live_shell_bytes "
        f"({live_bytes}); {whose}; nothing ran. The shell {handle} is "
        "kept: call again with it once a call ends, or raise [serve] live_shell_bytes",
        retryable=True,
    )
    return RunResult(1, "", error_line(err), shell=handle, shell_note=err.message)


def too_big(asked: str, new: str, size: int, live_bytes: int) -> RunResult:
    err = ToolshellError(
        ErrorCode.UNAVAILABLE,
        f"the shell {asked[:12]}… holds {size} bytes of files, more than [serve] live_shell_bytes "
        f"({live_bytes}) lets a worker keep live; nothing ran. Raise [serve] live_shell_bytes to use "
        f"it again (it is kept), or run the script in the new shell {new}",
    )
    return RunResult(1, "", error_line(err), shell=new, shell_note=err.message)


def store_failed(handle: str | None, cause: ToolshellError) -> RunResult:
    """Before the script started the store failed: nothing ran, and the shell is kept."""
    if not cause.retryable:
        raise cause
    kept = f"; the shell {handle} is kept: call again with it" if handle else "; call again"
    err = ToolshellError(ErrorCode.UNAVAILABLE, f"{cause.message}; nothing ran{kept}", retryable=True)
    return RunResult(1, "", error_line(err), shell=handle, shell_note=err.message)


def failed_after_start(handle: str, cause: ToolshellError) -> RunResult:
    err = ToolshellError(
        cause.code,
        f"the script started, but its run failed: {cause.message}; it may have run in part. The shell keeps "
        "the state saved before this call",
        retryable=cause.retryable,
    )
    return RunResult(1, "", error_line(err), shell=handle, shell_note=err.message)
