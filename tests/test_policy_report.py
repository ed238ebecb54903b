"""The stop report: the `tools` part of a `bash` result."""

from __future__ import annotations

import json

from toolshell.policy import NOT_REACHED, ScriptReport
from toolshell.policy.report import PREVIEW_CHARS, preview_value


def _seed_run() -> ScriptReport:
    report = ScriptReport()
    for _ in range(3):
        report.record("tools github list-pulls", {"state": "open"}, "read_only", True, [])
    report.record("tools linear create-issue", {"title": "Flaky test"}, "changes", True, {"id": "EVE-1201"})
    return report


def test_a_run_time_stop_reports_exactly_like_the_seed() -> None:
    report = _seed_run()
    report.stop("needs_approval", {"tool": "tools github delete-branch", "input": {"branch": "fix-x"}}, "requested")
    assert report.to_json(exit_code=1) == {
        "done": [
            {
                "tool": "tools linear create-issue",
                "input": {"title": "Flaky test"},
                "ok": True,
                "result": {"id": "EVE-1201"},
            }
        ],
        "read_only_calls": 3,
        "stopped": {
            "reason": "needs_approval",
            "approval": "requested",
            "call": {"tool": "tools github delete-branch", "input": {"branch": "fix-x"}},
        },
        "not_reached": "the stopped call and everything after it; write a new script for the rest",
    }
    assert NOT_REACHED == "the stopped call and everything after it; write a new script for the rest"


def test_a_call_limit_stop_has_no_approval() -> None:
    report = _seed_run()
    report.stop("call_limit", {"tool": "tools github get-pull", "input": {"number": 51}})
    out = report.to_json(exit_code=1)
    assert out is not None
    assert out["stopped"] == {
        "reason": "call_limit",
        "approval": None,
        "call": {"tool": "tools github get-pull", "input": {"number": 51}},
    }
    assert out["not_reached"] == NOT_REACHED


def test_a_call_held_before_start_reports_an_empty_done() -> None:
    report = ScriptReport()
    report.stop(
        "needs_approval",
        {"tool": "tools github delete-branch", "input": {"branch": "fix-x"}},
        "requested",
        before_start=True,
    )
    assert report.to_json(exit_code=1) == {
        "done": [],
        "read_only_calls": 0,
        "stopped": {
            "reason": "needs_approval",
            "approval": "requested",
            "call": {"tool": "tools github delete-branch", "input": {"branch": "fix-x"}},
            "before_start": True,
        },
        "not_reached": NOT_REACHED,
    }


def test_the_first_stop_wins() -> None:
    report = ScriptReport()
    report.stop("needs_approval", {"tool": "tools a b", "input": {}}, "requested")
    report.stop("call_limit", {"tool": "tools c d", "input": {}})
    assert report.stopped == {
        "reason": "needs_approval",
        "approval": "requested",
        "call": {"tool": "tools a b", "input": {}},
    }


def test_a_script_that_only_read_has_no_report() -> None:
    report = ScriptReport()
    report.record("tools github list-pulls", {}, "read_only", True, [])
    report.record("tools github get-pull", {"number": 1}, "read_only", False, "not found")
    assert report.to_json(exit_code=1) is None
    assert not report.failed_after_changes()


def test_failed_calls_that_may_have_changed_something_are_listed_as_not_ok() -> None:
    report = ScriptReport()
    report.record("tools linear create-issue", {"title": "x"}, "changes", False, "rate limited")
    assert report.failed_after_changes()
    assert report.to_json(exit_code=1) == {
        "done": [{"tool": "tools linear create-issue", "input": {"title": "x"}, "ok": False, "result": "rate limited"}],
        "read_only_calls": 0,
    }


def test_a_stopped_script_is_not_a_failure_after_changes() -> None:
    report = _seed_run()
    report.stop("needs_approval", {"tool": "tools a b", "input": {}}, "requested")
    assert not report.failed_after_changes()


def test_a_script_that_succeeded_has_no_report_even_after_changes() -> None:
    report = _seed_run()
    assert report.to_json(exit_code=0) is None
    assert report.to_json(exit_code=2) is not None  # the same calls, but the script failed


def test_a_stopped_script_reports_whatever_its_exit_code() -> None:
    report = ScriptReport()
    report.stop("call_limit", {"tool": "tools a b", "input": {}})
    assert report.to_json(exit_code=0) is not None


def test_what_a_script_wrote_comes_back_as_a_bounded_preview() -> None:
    report = ScriptReport()
    content = "".join(f"line {n} of the file the script wrote\n" for n in range(500))
    report.record("tools fs write-file", {"path": "/w/a.txt", "content": content}, "changes", True, "ok")
    entry = report.done[0]
    assert entry["input"] == {"path": "/w/a.txt", "content": content[:80] + f"… [{len(content):,} characters]"}
    assert len(json.dumps(entry["input"])) <= PREVIEW_CHARS


def test_a_long_result_keeps_its_shape_with_each_cut_said() -> None:
    report = ScriptReport()
    listed = {"files": [f"file-{n}" for n in range(100)], "n": 100}
    report.record("tools fs write", {"path": "a"}, "changes", True, listed)
    assert report.done[0]["result"] == {"files": [f"file-{n}" for n in range(8)] + ["[92 more items]"], "n": 100}


def test_a_preview_too_long_even_when_cut_is_its_json_cut_with_a_marker() -> None:
    value = {f"key{n}": "x" * 70 for n in range(8)}
    shown = preview_value(value)
    assert isinstance(shown, str) and len(shown) < PREVIEW_CHARS + 40
    assert shown.startswith('{"key0": "xxx') and shown.endswith(" more characters]")
