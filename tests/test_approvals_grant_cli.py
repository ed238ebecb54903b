"""`toolshell approvals grant ID` says what it grants, and on a terminal that never listed the
request it shows the call and asks first: the id a person was handed (in a message, a stop
report another agent wrote) may name another call than they think."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from _cli_support import CLI, on_a_terminal, toolshell

STRICT = '[approval]\nmode = "strict"\n'
SCRIPT = "tools runtime mcp action=disable server=text_metrics"
ASKS = 'tools runtime mcp {"action": "disable", "server": "text_metrics"}'


def _pending(tmp_path: Path) -> tuple[list[str], str]:
    """A call held for approval; the options that reach its state, and its request id."""
    (tmp_path / "strict.toml").write_text(STRICT)
    where = ["--config", str(tmp_path / "strict.toml"), "--state-dir", str(tmp_path / "state")]
    stopped = toolshell("run", *where, "--json", "-c", SCRIPT, cwd=tmp_path)
    return where, json.loads(stopped.stdout)["tools"]["stopped"]["request_id"]


def _status(where: list[str], request_id: str) -> list[str]:
    listed = json.loads(toolshell("approvals", "list", "--json", *where).stdout)
    return [r["id"] for r in listed if r["id"] == request_id]


def test_a_grant_on_a_terminal_that_never_listed_the_request_shows_the_call_and_a_no_grants_nothing(
    tmp_path: Path,
) -> None:
    where, request_id = _pending(tmp_path)
    code, seen = on_a_terminal([*CLI, "approvals", "grant", request_id, *where], tmp_path, {}, b"n\n", b"[y/N]")
    assert code == 1, seen
    assert f"{request_id} was never listed on this terminal; it asks for {ASKS} (mutating)" in seen
    assert "Grant it? [y/N]" in seen and f"not granted: {request_id} stays pending" in seen
    assert _status(where, request_id) == [request_id], "still pending"
    code, seen = on_a_terminal([*CLI, "approvals", "grant", request_id, *where], tmp_path, {}, b"y\n", b"[y/N]")
    assert code == 0 and f"granted {request_id} (once): {ASKS} (mutating)" in seen
    assert _status(where, request_id) == []


def test_a_grant_of_a_request_this_terminal_listed_grants_at_once_and_prints_what_it_granted(tmp_path: Path) -> None:
    where, request_id = _pending(tmp_path)
    cli, options = shlex.join(CLI), shlex.join(where)
    line = f"{cli} approvals list {options} && {cli} approvals grant {request_id} {options}; echo exit=$?"
    code, seen = on_a_terminal(["bash", "-c", line], tmp_path, {}, b"n\n", b"[y/N]")
    assert code == 0 and "exit=0" in seen, seen
    assert "[y/N]" not in seen and f"granted {request_id} (once): {ASKS} (mutating)" in seen


def test_a_grant_without_a_terminal_or_with_yes_prints_what_it_granted_without_asking(tmp_path: Path) -> None:
    where, request_id = _pending(tmp_path)
    piped = toolshell("approvals", "grant", request_id, *where)
    (tmp_path / "b").mkdir()
    where2, second = _pending(tmp_path / "b")
    code, seen = on_a_terminal(
        [*CLI, "approvals", "grant", second, "--always", "--yes", *where2], tmp_path, {}, b"", b"\0"
    )
    assert (piped.returncode, piped.stdout) == (0, f"granted {request_id} (once): {ASKS} (mutating)\n")
    assert code == 0 and "[y/N]" not in seen
    assert f"granted {second} (always): tools runtime mcp with any input, while its server stays the same" in seen
