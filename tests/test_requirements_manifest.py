"""docs/requirements.md and docs/security.md name tests that pytest collects: a renamed, deleted,
nested or otherwise uncollected test breaks this, not the pages.

A function of the right name is not enough (a `test_…` nested in another function, or in a class
pytest does not collect, never runs), so the named files are collected by pytest itself, once."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_ID = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")
_NAMED = re.compile(r"`(?:(tests/[\w/]+\.py)|…)::(\w+)`")
Named = list[tuple[str, str]]


def in_requirements() -> Named:
    return _ID.findall((ROOT / "docs" / "requirements.md").read_text(encoding="utf-8"))


def in_security() -> Named:
    """`tests/f.py::name`, and `…::name` for another test of the file named last."""
    named: Named = []
    current = ""
    for file, name in _NAMED.findall((ROOT / "docs" / "security.md").read_text(encoding="utf-8")):
        current = file or current
        named.append((current, name))
    return named


def collect(root: Path, files: list[str]) -> set[str]:
    """The ids pytest collects from `files` (relative to `root`), parameters dropped."""
    env = {k: v for k, v in os.environ.items() if k != "CI"}  # collecting, not running: nothing to fail
    argv = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *files]
    done = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, f"collection failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return {line.split("[", 1)[0] for line in done.stdout.splitlines() if "::" in line}


def missing(named: Named, collected: set[str]) -> list[str]:
    return [f"{file}::{name}" for file, name in named if f"{file}::{name}" not in collected]


@pytest.fixture(scope="module")
def collected() -> set[str]:
    files = sorted({file for file, _ in in_requirements() + in_security() if (ROOT / file).is_file()})
    return collect(ROOT, files)


def test_every_test_the_manifest_names_is_collected(collected: set[str]) -> None:
    named = in_requirements()
    assert len(named) > 100  # the manifest maps every rule; a broken pattern would find none
    assert missing(named, collected) == []


def test_every_test_the_security_page_names_is_collected(collected: set[str]) -> None:
    named = in_security()
    assert len(named) > 80 and all(file for file, _ in named)
    assert missing(named, collected) == []


SAMPLE = """
def test_at_the_top():
    pass


def test_outer():
    def test_nested():
        pass


class Helpers:
    def test_in_a_class_pytest_does_not_collect(self):
        pass


class TestCollected:
    def test_in_a_collected_class(self):
        pass
"""


def test_a_named_test_nested_in_a_function_or_in_an_uncollected_class_counts_as_missing(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_sample.py").write_text(SAMPLE)
    file = "tests/test_sample.py"
    named = [(file, name) for name in ("test_at_the_top", "test_nested", "test_in_a_class_pytest_does_not_collect")]
    named += [(file, "test_in_a_collected_class"), ("tests/test_gone.py", "test_at_the_top")]
    assert missing(named, collect(tmp_path, [file])) == [
        f"{file}::test_nested",
        f"{file}::test_in_a_class_pytest_does_not_collect",
        f"{file}::test_in_a_collected_class",  # collected as TestCollected::…, which the page must say
        "tests/test_gone.py::test_at_the_top",
    ]
