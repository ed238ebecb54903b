"""Running the `toolshell` command line as a subprocess, the way a person or an attacker does."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")
CLI = [sys.executable, "-c", "from toolshell.frontends.cli import main; main()"]
"""The command line of `toolshell` from this checkout's `src`."""


@dataclass(frozen=True)
class Ran:
    """What one run of the command line did: exit code, and its output as text (bytes that are not
    UTF-8 shown as `\\x..` escapes, so a test can still read them)."""

    returncode: int
    stdout: str
    stderr: str


def toolshell(
    *args: str | bytes, cwd: Path | None = None, env: dict[str, str] | None = None, stdin: str | bytes = b""
) -> Ran:
    """`toolshell ARGS…` in a fresh interpreter, this checkout's `src` first on the path. `args` and
    `stdin` may be bytes, to hand it what is not UTF-8."""
    full_env = {**os.environ, "PYTHONPATH": SRC, **(env or {})}
    done = subprocess.run(
        [sys.executable, "-c", "from toolshell.frontends.cli import main; main()", *args],
        cwd=cwd,
        env=full_env,
        input=stdin.encode() if isinstance(stdin, str) else stdin,
        capture_output=True,
        timeout=60,
    )
    out, err = (b.decode("utf-8", "backslashreplace") for b in (done.stdout, done.stderr))
    return Ran(done.returncode, out, err)


def on_a_terminal(
    argv: list[str],
    cwd: Path,
    env: dict[str, str],
    answer: bytes,
    prompt: bytes,
    meanwhile: Callable[[], None] = lambda: None,
) -> tuple[int, str]:
    """`argv` (e.g. `[*CLI, "config", "trust"]`) with a pseudo-terminal as stdin, stdout and stderr;
    `answer` is typed once `prompt` shows, after `meanwhile` ran. Returns the exit code and all
    the terminal showed."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        argv, cwd=cwd, env={**os.environ, "PYTHONPATH": SRC, **env}, stdin=follower, stdout=follower, stderr=follower
    )
    os.close(follower)
    seen = b""
    typed = False
    while True:
        ready, _, _ = select.select([leader], [], [], 30)
        assert ready, f"no output from the terminal within 30 s: {seen!r}"
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the program ended and closed the terminal
            break
        if not chunk:
            break
        seen += chunk
        if not typed and prompt in seen:
            meanwhile()
            os.write(leader, answer)
            typed = True
    os.close(leader)
    return proc.wait(timeout=30), seen.decode("utf-8", "replace")
