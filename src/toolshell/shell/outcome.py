"""What a finished bashkit run says, made readable: its exit code and notes, its cut streams, and
its output passed on as it is written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from toolshell.redact import Redactor
from toolshell.shell.output import Collected

CANCEL_NOISE = "execution cancelled"
"""bashkit's note on the cancel that ends a stopped script (the result leaves it out)."""
OnOutput = Callable[[str, str], None]
"""Receives a run's output as it is written: a stdout chunk and a stderr chunk (either may be empty)."""


def outcome(result: object, stopped: bool, stderr: str, timeout_seconds: float) -> tuple[int, str]:
    """The exit code and stderr of a finished run, with bashkit's own notes made readable.

    Args:
        result: bashkit's result.
        stopped: the run was stopped (an approval, the call budget): exit non-zero, no cancel note.
        stderr: what the script wrote on stderr.
        timeout_seconds: `[shell] timeout_seconds`, named when the run passed it.
    """
    exit_code: int = getattr(result, "exit_code", 1)
    error: str | None = getattr(result, "error", None)
    if stopped and stderr.endswith(CANCEL_NOISE):
        stderr = stderr[: -len(CANCEL_NOISE)]
    if stopped:
        exit_code = exit_code or 1
    elif error and error not in stderr:
        stderr += f"{error}\n"
    if error and "timeout" in error:
        stderr += (
            f"the script ran past the shell's {timeout_seconds:g} s limit; "
            "raise [shell] timeout_seconds for longer runs\n"
        )
    return exit_code, stderr


def streamed(collect: OnOutput, on_output: OnOutput, redact: Redactor, stopped: Callable[[], bool]) -> OnOutput:
    """`collect`, and each chunk passed on masked. bashkit's note on the cancel that ends a stopped
    script is left out, as the result leaves it out."""

    def both(stdout: str, stderr: str) -> None:
        collect(stdout, stderr)
        if stopped() and stderr.endswith(CANCEL_NOISE):
            stderr = stderr[: -len(CANCEL_NOISE)]
        if stdout or stderr:
            on_output(redact(stdout), redact(stderr))

    return both


def shell_cut(stream: Collected, result: object, name: str) -> Collected:
    """Mark a stream bashkit cut at its own limit (`shell.output.SHELL_OUTPUT_LIMIT`)."""
    if getattr(result, f"{name}_truncated", False):
        return dataclasses.replace(stream, shell_cut=True)
    return stream


__all__ = ["CANCEL_NOISE", "OnOutput", "outcome", "shell_cut", "streamed"]
