"""What `run` and `plan` print once done, warm or cold: one rule for the CLI and the daemon."""

from __future__ import annotations

import json
from typing import Any

from toolshell.result import RunResult


def run_output(result: RunResult, as_json: bool) -> tuple[str, str]:
    """The stdout and stderr `toolshell run` prints after the script's own streamed output: with
    `--json` the one JSON object; without, the stop report when a call stopped the script."""
    if as_json:
        return json.dumps(result.to_json(), ensure_ascii=False) + "\n", ""
    if result.tools and result.tools.get("stopped"):
        return "", json.dumps({"tools": result.tools}, ensure_ascii=False) + "\n"
    return "", ""


def plan_output(plan: dict[str, Any]) -> str:
    """What `toolshell plan` prints."""
    return json.dumps(plan, indent=2, ensure_ascii=False) + "\n"
