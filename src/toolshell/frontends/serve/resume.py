"""What running a `bash` call again by replay takes, and whether its shell still allows it.

A task or a yielded call records, sealed on its row, its script, its caller and its shell as it
is before the call: the handle and the stored version (a shell is saved only when a call ends,
so while it runs the store holds the state it started from). The worker that takes the call
over runs it again only if the shell is still at that version (docs/tasks.md, Resume by replay).

A shell that reaches the host (a writable `[[shell.mounts]]` folder, `[shell] network_allow`)
changes what replay cannot answer from a record: run again, its script would write those files
and send those requests twice. Such a run is not resumed (`not_replayed` says why, and that
reason is what a takeover reports) unless `[shell] replay_host_writes` accepts the repeat.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types

from toolshell.config import ShellConfig
from toolshell.errors import ErrorCode, ToolshellError, error_result
from toolshell.shell.handles import Forged
from toolshell.shells import Shells

NOT_RESUMED = (
    "the worker running this call stopped, and it could not be run again by replay: its shell was saved "
    "since the call started (or is gone), so the state before the call is not there. What it did stays done; "
    "check its effects, then run what is left"
)


def shell_version(shells: Shells, caller: str | None, handle: str) -> int | None:
    """The stored version of the caller's shell `handle` (the state a run starts from); None when
    it is gone or does not open."""
    try:
        kept = shells.handles.find(handle, caller, shells.keys)
    except (Forged, ToolshellError):
        return None
    return None if kept is None else kept.version


def not_replayed(config: ShellConfig) -> str | None:
    """Why a run on a shell of `config` is not run again by replay (what it reaches outside the
    sandbox, which no record answers); None when it reaches nothing or the config accepts the repeat."""
    if config.replay_host_writes:
        return None
    reached = []
    writable = [m.path for m in config.mounts if m.writable]
    if writable:
        reached.append(f"writes to the host through the writable [[shell.mounts]] {', '.join(writable)}")
    if config.network_allow:
        reached.append("network requests ([shell] network_allow)")
    if not reached:
        return None
    return (
        f"its shell reaches the host ({' and '.join(reached)}), and running the script again would repeat "
        "those. What it did stays done; check its effects, then run what is left ([shell] replay_host_writes "
        "= true resumes such runs when repeating them is safe)"
    )


def resume_info(
    shells: Shells, caller: str | None, handle: str, script: str, asks: bool, version: int | None = None
) -> dict[str, Any] | None:
    """What running a call again by replay takes; None when its shell cannot be read (then the
    run itself says so, and nothing is resumed). A run that must not be replayed gets only its
    caller and why (`not_replayed`). `version`: the shell's version the run started from, when it
    has found its shell (else read now)."""
    why = not_replayed(shells.host.config.shell)
    if why is not None:
        return {"caller": caller, "not_replayed": why}
    if version is None:
        version = shell_version(shells, caller, handle)
    if version is None:
        return None
    return {"script": script, "caller": caller, "handle": handle, "version": version, "asks": asks}


def shell_gone(shells: Shells, caller: str | None, resume: dict[str, Any]) -> types.CallToolResult | None:
    """The error result of a call that cannot be run again (its shell moved on); None when it can."""
    if shell_version(shells, caller, str(resume["handle"])) != resume.get("version"):
        return error_result(ToolshellError(ErrorCode.UNAVAILABLE, NOT_RESUMED))
    return None


__all__ = ["NOT_RESUMED", "not_replayed", "resume_info", "shell_gone", "shell_version"]
