"""Running the `toolshell` command line as a subprocess, the way a person or an attacker does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")


def toolshell(
    *args: str | bytes, cwd: Path | None = None, env: dict[str, str] | None = None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    """`toolshell ARGS…` in a fresh interpreter (this checkout's `src` first on the path); text out,
    undecodable bytes shown as `\\x..` escapes so a test can still read them."""
    full_env = {**os.environ, "PYTHONPATH": SRC, **(env or {})}
    return subprocess.run(
        [sys.executable, "-c", "from toolshell.frontends.cli import main; main()", *args],
        cwd=cwd,
        env=full_env,
        input=stdin,
        capture_output=True,
        text=True,
        errors="backslashreplace",
        timeout=60,
    )
