"""docs/scale-out.md's examples that cannot run here (a Kubernetes manifest, worker environment)
still name only options and variables toolshell has."""

from __future__ import annotations

import json
import re
from pathlib import Path

from toolshell.frontends.cli import main

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "scale-out.md").read_text(encoding="utf-8")
SOURCE = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "src" / "toolshell").rglob("*.py"))


def test_the_manifests_serve_arguments_are_options_of_toolshell_serve() -> None:
    [args] = re.findall(r"args: (\[.*?\])", DOC)
    words = json.loads(args)
    serve = main.commands["serve"]  # type: ignore[attr-defined]
    options = {opt for param in serve.params for opt in param.opts}
    assert words[0] == "serve" and [w for w in words if w.startswith("--")]
    assert {w for w in words if w.startswith("--")} <= options


def test_every_variable_the_page_names_is_one_toolshell_reads() -> None:
    named = set(re.findall(r"\bTOOLSHELL_[A-Z_]+\b", DOC))
    assert {"TOOLSHELL_STATE_URL", "TOOLSHELL_STATE_KEYS", "TOOLSHELL_SERVE_TOKEN"} <= named
    assert all(f'"{name}"' in SOURCE for name in named), named
