"""A check that cannot run skips with its reason where `CI` is unset, and fails under CI.

The tests run pytest on a small test file in a subprocess, once without `CI` and once with it, and
read each test's outcome from the JUnit report."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
SAMPLE = """
import pytest
from _ci_support import requires, skip_or_fail


def test_cannot_run_its_check():
    skip_or_fail("the browser is not installed")


@pytest.fixture
def outsider():
    skip_or_fail("needs root")


def test_with_a_fixture_that_cannot_run(outsider):
    pass


@requires(False, reason="the suite is not installed")
def test_marked_unavailable():
    pass


@requires("/usr/bin/true", reason="never shown")
def test_marked_available():
    pass
"""


def _outcomes(tmp_path: Path, ci: str | None) -> dict[str, tuple[str, str]]:
    """Each sample test's outcome (`passed`, `skipped`, `failure`, `error`) and its message."""
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    report = tmp_path / "report.xml"
    env = {k: v for k, v in os.environ.items() if k != "CI"} | {"PYTHONPATH": str(TESTS)}
    if ci is not None:
        env["CI"] = ci
    argv = [sys.executable, "-m", "pytest", "-p", "_ci_support", "-p", "no:cacheprovider", f"--junitxml={report}"]
    subprocess.run([*argv, "test_sample.py"], cwd=tmp_path, env=env, capture_output=True, timeout=120, check=False)
    outcomes: dict[str, tuple[str, str]] = {}
    for case in ET.parse(report).iter("testcase"):
        found = [(c.tag, c.get("message", "")) for c in case if c.tag in ("skipped", "failure", "error")]
        outcomes[case.get("name", "")] = found[0] if found else ("passed", "")
    return outcomes


def test_without_ci_a_check_that_cannot_run_is_skipped_with_its_reason(tmp_path: Path) -> None:
    outcomes = _outcomes(tmp_path, None)
    assert {name: tag for name, (tag, _) in outcomes.items()} == {
        "test_cannot_run_its_check": "skipped",
        "test_with_a_fixture_that_cannot_run": "skipped",
        "test_marked_unavailable": "skipped",
        "test_marked_available": "passed",
    }
    assert "the browser is not installed" in outcomes["test_cannot_run_its_check"][1]
    assert "the suite is not installed" in outcomes["test_marked_unavailable"][1]


@pytest.mark.parametrize("ci", ["1", "true"])
def test_under_ci_a_check_that_cannot_run_fails_naming_what_is_missing(tmp_path: Path, ci: str) -> None:
    outcomes = _outcomes(tmp_path, ci)
    assert {name: tag for name, (tag, _) in outcomes.items()} == {
        "test_cannot_run_its_check": "failure",
        "test_with_a_fixture_that_cannot_run": "error",  # a fixture's failure is the test's setup error
        "test_marked_unavailable": "error",
        "test_marked_available": "passed",
    }
    assert "the browser is not installed (CI is set" in outcomes["test_cannot_run_its_check"][1]
    assert "needs root (CI is set" in outcomes["test_with_a_fixture_that_cannot_run"][1]
    assert "the suite is not installed (CI is set" in outcomes["test_marked_unavailable"][1]


def test_an_empty_ci_variable_counts_as_unset(tmp_path: Path) -> None:
    assert _outcomes(tmp_path, "")["test_cannot_run_its_check"][0] == "skipped"
