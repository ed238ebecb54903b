"""The grant hint of a call that needs approval: one line saying exactly what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolshell.calls import approval
from toolshell.config import Config
from toolshell.policy.risk import Risk
from toolshell.registry.entry import ToolEntry

ENTRY = ToolEntry("fs", "write_file", annotations={"destructiveHint": True})
RISK = Risk("needs_approval", why="destructive", message="tools fs write-file may overwrite data")


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(approval, "PROCESS", approval.ProcessOptions())
    for name in ("TOOLSHELL_CONFIG", "TOOLSHELL_STATE_DIR", "TOOLSHELL_STATE_URL"):
        monkeypatch.delenv(name, raising=False)


def test_a_config_and_state_dir_given_by_the_environment_are_named_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "c.toml").write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOOLSHELL_CONFIG", "c.toml")
    monkeypatch.setenv("TOOLSHELL_STATE_DIR", "state")
    approval.name_process_options(None, None, Config())  # what `serve` passes when no flag was given
    message = approval.approval_message(ENTRY, RISK, "apr_1")
    grant = f"toolshell approvals grant apr_1 --config {tmp_path / 'c.toml'} --state-dir {tmp_path / 'state'}"
    assert f"a person runs `{grant}`, then run the script again" in message
    assert "\n" not in message


def test_a_state_dir_the_config_chose_is_named_when_serve_passes_its_config(tmp_path: Path) -> None:
    config = Config.model_validate({"state": {"dir": str(tmp_path / "kept")}})
    approval.name_process_options(None, None, config)
    assert f"--state-dir {tmp_path / 'kept'}`" in approval.approval_message(ENTRY, RISK, "apr_2")


def test_a_state_url_from_the_environment_is_asked_for_but_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLSHELL_STATE_URL", "postgresql://u:secret@db/toolshell")
    approval.name_process_options(None, "/srv/state")
    message = approval.approval_message(ENTRY, RISK, "apr_3")
    assert "`TOOLSHELL_STATE_URL=<as set here> toolshell approvals grant apr_3" in message
    assert "secret" not in message


def test_the_hint_names_the_setting_for_unattended_writes_and_the_default_stays_normal() -> None:
    message = approval.approval_message(ENTRY, RISK, "apr_4")
    assert message.endswith(
        'to run writes unattended in a checkout you trust, set [approval] mode = "off" in its config '
        "(docs/configuration.md, Unattended runs))"
    )
    assert Config().approval.mode == "normal"
