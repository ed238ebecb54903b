"""docs/scale-out.md's examples that cannot run here (a Kubernetes manifest, worker environment)
still name only options and variables toolshell has."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "scale-out.md").read_text(encoding="utf-8")
SOURCE = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "src" / "toolshell").rglob("*.py"))


def test_every_variable_the_page_names_is_one_toolshell_reads() -> None:
    named = set(re.findall(r"\bTOOLSHELL_[A-Z_]+\b", DOC))
    assert {"TOOLSHELL_STATE_URL", "TOOLSHELL_STATE_KEYS", "TOOLSHELL_SERVE_TOKEN"} <= named
    assert all(f'"{name}"' in SOURCE for name in named), named
