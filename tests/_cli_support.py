"""Running the `toolshell` command line as a subprocess, the way a person or an attacker does."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")


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
