"""docs/requirements.md names tests that exist: a renamed or deleted test breaks this, not the manifest."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_ID = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")


def _defined(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_every_test_the_manifest_names_exists() -> None:
    text = (ROOT / "docs" / "requirements.md").read_text(encoding="utf-8")
    named = _ID.findall(text)
    assert len(named) > 100  # the manifest maps every rule; a broken pattern would find none
    missing = [
        f"{file}::{name}" for file, name in named if not (ROOT / file).is_file() or name not in _defined(ROOT / file)
    ]
    assert missing == []


_NAMED = re.compile(r"`(?:(tests/[\w/]+\.py)|…)::(\w+)`")


def test_every_test_the_security_page_names_exists() -> None:
    """`tests/f.py::name`, and `…::name` for another test of the file named last."""
    text = (ROOT / "docs" / "security.md").read_text(encoding="utf-8")
    named: list[tuple[str, str]] = []
    current = ""
    for file, name in _NAMED.findall(text):
        current = file or current
        named.append((current, name))
    assert len(named) > 80 and all(file for file, _ in named)
    missing = [
        f"{file}::{name}" for file, name in named if not (ROOT / file).is_file() or name not in _defined(ROOT / file)
    ]
    assert missing == []
