"""The machine-readable CLI: `--json` on every listing, and `--config`/`--state-dir` accepted before
or after any subcommand."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from toolshell.frontends.cli import main
from toolshell.policy.approvals import Approvals
from toolshell.registry.entry import ToolEntry
from toolshell.scripts.store import ScriptStore
from toolshell.store import Store

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
DELETE = ToolEntry("github", "delete-branch", "Delete a branch.", annotations={"destructiveHint": True})


def _invoke(*args: str) -> Result:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def _request(state: Path, branch: str = "fix-x") -> str:
    store = Store(state / "toolshell.db")
    try:
        return Approvals(store).request(DELETE, {"branch": branch}, "sess-1", "destructive", "may delete data").id
    finally:
        store.close()


def test_approvals_list_json_is_an_array_of_id_tool_input_risk_why_status_created(tmp_path: Path) -> None:
    state = tmp_path / "state"
    request_id = _request(state)
    [shown] = json.loads(_invoke("approvals", "list", "--json", "--state-dir", str(state)).stdout)
    assert ISO.match(shown.pop("created"))
    assert shown == {
        "id": request_id,
        "tool": "tools github delete-branch",
        "input": {"branch": "fix-x"},
        "risk": "needs_approval",
        "why": "destructive",
        "status": "pending",
        "message": "may delete data",
        "session_id": "sess-1",
    }


def test_approvals_list_json_with_nothing_pending_is_an_empty_array(tmp_path: Path) -> None:
    assert json.loads(_invoke("approvals", "list", "--json", "--state-dir", str(tmp_path)).stdout) == []


def test_approvals_grants_json_lists_kind_tool_input_and_created(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    _invoke("approvals", "grant", _request(tmp_path / "state", "a"), "--state-dir", state)
    _invoke("approvals", "grant", _request(tmp_path / "state", "b"), "--always", "--state-dir", state)
    grants = json.loads(_invoke("approvals", "grants", "--json", "--state-dir", state).stdout)
    assert all(ISO.match(g.pop("created")) for g in grants)
    server = {"server": {"name": "github", "program": None}, "status": "not_configured"}
    note = {"note": "not in force: no server github is configured"}
    assert grants == [
        {"kind": "once", "tool": "tools github delete-branch", "input": {"branch": "a"}, **server, **note},
        {"kind": "always", "tool": "tools github delete-branch", "input": None, **server, **note},
    ]


def test_scripts_list_json_lists_name_description_schema_and_times(tmp_path: Path) -> None:
    store = Store(tmp_path / "toolshell.db")
    ScriptStore(store).save("greet", "echo hi", "Say hi.", {"type": "object"})
    store.close()
    [script] = json.loads(_invoke("scripts", "list", "--json", "--state-dir", str(tmp_path)).stdout)
    assert ISO.match(script.pop("created")) and ISO.match(script.pop("updated"))
    assert script == {"name": "greet", "description": "Say hi.", "input_schema": {"type": "object"}}
    assert json.loads(_invoke("scripts", "--json", "--state-dir", str(tmp_path)).stdout)[0]["name"] == "greet"


def test_scripts_json_with_another_verb_says_where_it_goes(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["scripts", "greet", "--json", "--state-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "--json goes with `toolshell scripts list`" in result.stderr


def test_timeline_json_is_the_grouped_rows(tmp_path: Path) -> None:
    _invoke("run", "-c", "tools text-metrics text-length text=hi", "--state-dir", str(tmp_path))
    [row] = json.loads(_invoke("timeline", "--json", "--state-dir", str(tmp_path)).stdout)
    assert (row["type"], row["source"], [c["command"] for c in row["calls"]]) == (
        "shell.call",
        "cli",
        ["tools text-metrics text-length"],
    )


@pytest.mark.parametrize(
    "args",
    [
        ["approvals", "list", "--state-dir", "{state}"],
        ["approvals", "--state-dir", "{state}", "list"],
        ["--state-dir", "{state}", "approvals", "list"],
        ["--state-dir", "/nowhere/else", "approvals", "--state-dir", "{state}", "list"],
        ["approvals", "--state-dir", "/nowhere/else", "list", "--state-dir", "{state}"],
        ["approvals", "--state-dir", "{state}"],
    ],
)
def test_state_dir_is_accepted_before_or_after_the_subcommand_and_the_nearest_wins(
    args: list[str], tmp_path: Path
) -> None:
    state = tmp_path / "state"
    request_id = _request(state)
    shown = _invoke(*[a.replace("{state}", str(state)) for a in args]).stdout
    assert request_id in shown


def test_approvals_grant_and_deny_take_the_options_after_their_arguments(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first, second = _request(state, "a"), _request(state, "b")
    granted = _invoke("approvals", "grant", first, "--state-dir", str(state)).stdout
    assert granted == f'granted {first} (once): tools github delete-branch {{"branch": "a"}} (destructive)\n'
    assert _invoke("approvals", "deny", second, "--state-dir", str(state)).stdout == f"denied {second}\n"
    revoked = _invoke("approvals", "revoke", "github", "delete-branch", "--state-dir", str(state)).stdout
    assert revoked == "revoked 1 grant of tools github delete-branch\n"


TRIGGER_CONFIG = '[[triggers]]\nname = "nightly"\nscript = "greet"\nschedule = "@daily"\n'


@pytest.mark.parametrize(
    "args",
    [
        ["triggers", "list", "--config", "{config}"],
        ["triggers", "--config", "{config}", "list"],
        ["--config", "{config}", "triggers", "list"],
        ["triggers", "list", "--config", "{config}", "--state-dir", "{state}"],
    ],
)
def test_config_is_accepted_before_or_after_the_subcommand(args: list[str], tmp_path: Path) -> None:
    config = tmp_path / "toolshell.toml"
    config.write_text(TRIGGER_CONFIG, encoding="utf-8")
    words = [a.replace("{config}", str(config)).replace("{state}", str(tmp_path)) for a in args]
    assert _invoke(*words).stdout.startswith("nightly ")


def test_config_validate_takes_the_file_as_path_or_as_config(tmp_path: Path) -> None:
    config = tmp_path / "toolshell.toml"
    config.write_text(TRIGGER_CONFIG, encoding="utf-8")
    as_path = _invoke("config", "validate", str(config)).stdout
    assert _invoke("config", "validate", "--config", str(config)).stdout == as_path
    assert _invoke("--config", str(config), "config", "validate").stdout == as_path
    twice = CliRunner().invoke(main, ["config", "validate", "a.toml", "--config", "b.toml"])
    assert twice.exit_code == 2 and "name the file once" in twice.stderr


@pytest.mark.parametrize("command", [["run", "-c", "echo hi"], ["timeline"], ["scripts", "list"]])
def test_a_config_given_after_the_subcommand_is_the_one_loaded(command: list[str], tmp_path: Path) -> None:
    broken = tmp_path / "broken.toml"
    broken.write_text("[nonsense\n", encoding="utf-8")
    result: Any = CliRunner().invoke(main, [*command, "--config", str(broken)])
    assert result.exit_code == 2 and f"config error in {broken}" in result.stderr


def test_the_grant_hint_of_a_stopped_run_names_the_options_the_run_was_started_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolshell.calls import approval

    monkeypatch.setattr(approval, "PROCESS", approval.ProcessOptions())
    config = tmp_path / "c.toml"
    config.write_text('[approval]\nrequire = ["text_metrics:*"]\n')
    state = tmp_path / "elsewhere"
    result = CliRunner().invoke(
        main, ["run", "--config", str(config), "--state-dir", str(state), "-c", "tools text-metrics text-length text=a"]
    )
    assert result.exit_code == 1
    message = json.loads(result.stderr.splitlines()[0])["error"]["message"]
    assert f"--config {config} --state-dir {state}`" in message
