"""The README's two set-up commands, `scripts/demo.sh` and `scripts/test.sh`, run against stand-ins
for python, pip and the tools they call (a copy of the scripts in a temporary checkout, so nothing
is installed): demo.sh shows progress while pip works and stops when pip fails; test.sh installs
the browser when it is missing and says so clearly when that fails (issue: the first hour); under
CI that failure stops it, and a test run that changes the checkout fails naming the files."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# `python3 -m venv .venv` makes a `.venv/bin/activate` that puts the stand-ins first on PATH.
PYTHON3 = """#!/usr/bin/env bash
mkdir -p .venv/bin
echo 'export PATH="$STUBS/venv:$PATH"' > .venv/bin/activate
"""

# The venv's python: pip prints what real pip prints (or fails when PIP_FAILS is set); playwright
# is missing; pytest says it ran (and writes the files PYTEST_WRITES names, as a careless test would).
PYTHON = """#!/usr/bin/env bash
case "$1 $2" in
  "-m pip")
    if [ -n "${PIP_FAILS:-}" ]; then echo "ERROR: No matching distribution found for mcp" >&2; exit 1; fi
    echo "Obtaining file:///checkout"
    echo "Requirement already satisfied: anyio in ./.venv"
    echo "Collecting bashkit"
    echo "Installing collected packages: bashkit, toolshell"
    echo "Successfully installed bashkit toolshell";;
  "-c import playwright") exit 1;;
  "-m pytest") echo "pytest ran"; for f in ${PYTEST_WRITES:-}; do echo changed >> "$f"; done;;
esac
"""


def _checkout(tmp_path: Path, install_browser: str) -> tuple[Path, dict[str, str]]:
    """A checkout holding copies of the set-up scripts, and an environment whose PATH has stand-ins."""
    checkout = tmp_path / "checkout"
    (checkout / "scripts").mkdir(parents=True)
    for name in ("demo.sh", "test.sh", "retry.sh"):
        shutil.copy(REPO / "scripts" / name, checkout / "scripts" / name)
    (checkout / "scripts" / "install_browser.sh").write_text(install_browser)
    (checkout / "scripts" / "postgres.sh").write_text("exit 1\n")
    stubs = tmp_path / "stubs"
    (stubs / "venv").mkdir(parents=True)
    tools = {"python3": PYTHON3, "ruff": "", "mypy": "", "npm": "", "toolshell": 'echo "toolshell ran $*"\n'}
    for name, body in tools.items():
        (stubs / name).write_text(body if body.startswith("#!") else f"#!/usr/bin/env bash\n{body}")
    (stubs / "venv" / "python").write_text(PYTHON)
    for stub in [*stubs.iterdir(), stubs / "venv" / "python"]:
        stub.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "VIRTUAL_ENV")}
    env.update(STUBS=str(stubs), PATH=f"{stubs}:/usr/bin:/bin")
    return checkout, env


def _run(checkout: Path, script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", f"scripts/{script}"], cwd=checkout, env=env, capture_output=True, text=True, timeout=60
    )


def test_demo_shows_progress_while_pip_installs_then_runs_the_quickstart(tmp_path: Path) -> None:
    checkout, env = _checkout(tmp_path, "exit 0\n")
    ran = _run(checkout, "demo.sh", env)
    assert ran.returncode == 0, ran.stderr
    assert ran.stderr.splitlines() == [
        "setting up .venv and installing toolshell into it (about half a minute the first time)…",
        "Collecting bashkit",
        "Installing collected packages: bashkit, toolshell",
        "Successfully installed bashkit toolshell",
        "installed; running examples/quickstart.sh",
    ]
    assert ran.stdout == "toolshell ran run examples/quickstart.sh\n"


def test_demo_stops_with_one_clear_line_when_pip_fails(tmp_path: Path) -> None:
    checkout, env = _checkout(tmp_path, "exit 0\n")
    ran = _run(checkout, "demo.sh", {**env, "PIP_FAILS": "1"})
    assert ran.returncode == 1
    assert "ERROR: No matching distribution found for mcp" in ran.stderr
    assert ran.stderr.splitlines()[-1] == (
        "pip could not install toolshell (its messages are above); fix that and run scripts/demo.sh again"
    )
    assert "toolshell ran" not in ran.stdout


def test_the_test_command_installs_the_missing_browser_before_the_tests(tmp_path: Path) -> None:
    checkout, env = _checkout(tmp_path, 'echo "browser installed"\n')
    ran = _run(checkout, "test.sh", env)
    assert ran.returncode == 0, ran.stderr
    assert "installing the browser for the web page test (scripts/install_browser.sh)…" in ran.stderr
    assert "browser installed" in ran.stdout
    assert ran.stdout.index("browser installed") < ran.stdout.index("pytest ran")


def test_the_test_command_goes_on_with_a_clear_line_when_the_browser_cannot_be_installed(tmp_path: Path) -> None:
    checkout, env = _checkout(tmp_path, "exit 1\n")
    ran = _run(checkout, "test.sh", env)
    assert ran.returncode == 0, ran.stderr
    assert (
        "the browser could not be installed: the web page test will be skipped "
        "(run scripts/install_browser.sh to retry)"
    ) in ran.stderr.splitlines()
    assert "pytest ran" in ran.stdout


def test_under_ci_the_test_command_stops_when_the_browser_cannot_be_installed(tmp_path: Path) -> None:
    checkout, env = _checkout(tmp_path, "exit 1\n")
    postgres = '[ "$1" != start ] || echo "export TOOLSHELL_TEST_POSTGRES_DIR=/nowhere"\n'
    (checkout / "scripts" / "postgres.sh").write_text(postgres)  # it starts: only the browser is missing
    ran = _run(checkout, "test.sh", {**env, "CI": "1"})
    assert ran.returncode == 1
    assert ran.stderr.splitlines()[-1].startswith("the browser could not be installed")
    assert "pytest ran" not in ran.stdout


def _committed(checkout: Path) -> None:
    (checkout / "docs").mkdir()
    (checkout / "docs" / "web-page.png").write_text("the tracked image\n")
    (checkout / ".gitignore").write_text(".venv/\n")
    git = ["git", "-C", str(checkout), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    for argv in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "checkout"]):
        subprocess.run([*git, *argv], check=True, capture_output=True)


def test_a_test_run_that_changes_the_checkout_fails_naming_each_file(tmp_path: Path) -> None:
    checkout, env = _checkout(tmp_path, "exit 0\n")
    _committed(checkout)
    ran = _run(checkout, "test.sh", {**env, "PYTEST_WRITES": "docs/web-page.png stray.txt"})
    assert ran.returncode == 1
    assert "pytest ran" in ran.stdout
    said = ran.stderr.splitlines()
    assert said[-3:] == [
        "the test suite changed the checkout (a test must write to its tmp_path, not here); git status now:",
        " M docs/web-page.png",
        "?? stray.txt",
    ]


def test_a_test_run_that_leaves_the_checkout_as_it_was_passes_even_with_changes_made_before(tmp_path: Path) -> None:
    checkout, env = _checkout(tmp_path, "exit 0\n")
    _committed(checkout)
    (checkout / "docs" / "web-page.png").write_text("an edit in progress\n")
    ran = _run(checkout, "test.sh", env)
    assert ran.returncode == 0, ran.stderr
    assert "pytest ran" in ran.stdout
