"""benchmarks/script_thread.py: the three ways of running a script give its output, and figures."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
import script_thread  # noqa: E402 - benchmarks/ is a folder of scripts, put on the path just above


def test_the_ways_print_the_same_and_report_cpu() -> None:
    figures = script_thread.measure(runs=30)
    assert figures["async execute"]["last_output"] == "5\n30\n"
    assert figures["thread + loop bridge"]["last_output"] == "5\n30\n"
    assert figures["async execute, no builtin"]["last_output"] == "30\n"
    assert figures["same_output"] is True
    for way in ("async execute", "thread + loop bridge", "async execute, no builtin"):
        assert figures[way]["cpu_us"] > 0 and figures[way]["wall_us"] > 0
