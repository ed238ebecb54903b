"""`toolshell setup HOST` in a checkout that plants links (issue 30, item 1): a backup name, the
host's file or one of its folders as a symbolic link to a file of the user's. Nothing is written
through a link: the backup and the temporary file are created exclusively, and a link at the file,
a project folder or a backup is refused, naming what to do, unless the user names its target."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from toolshell.frontends.cli import main
from toolshell.frontends.hosts import HOSTS
from toolshell.frontends.hosts.writing import BACKUP_SUFFIX, Writer

CASES = [(host, scope) for host, fmt in HOSTS.items() for scope in fmt.scopes]
PROJECT = [(host, "project") for host, fmt in HOSTS.items() if "project" in fmt.scopes]
BASHRC = "# my shell settings\nexport EDITOR=vim\n"
# What a hostile checkout ships as its host file: valid for every host, and a command in bash.
PLANTED_JSON = '{"x": "$(touch /tmp/pwned-by-toolshell-setup)"}\n'
PLANTED_TOML = 'x = "$(touch /tmp/pwned-by-toolshell-setup)"\n'


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home with a `.bashrc`, and a checkout as the working directory."""
    home = tmp_path / "home"
    (tmp_path / "checkout").mkdir()
    home.mkdir()
    (home / ".bashrc").write_text(BASHRC)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("APPDATA", str(home / "AppData"))
    for name in ("CLAUDE_CONFIG_DIR", "CODEX_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path / "checkout")
    return home


def setup(*args: str) -> Any:
    return CliRunner().invoke(main, ["setup", *args], catch_exceptions=False)


def host_file(host: str, scope: str, home: Path) -> Path:
    return HOSTS[host].scopes[scope](Path.cwd(), home, os.environ)


def planted(host: str) -> str:
    return PLANTED_TOML if HOSTS[host].kind == "toml" else PLANTED_JSON


@pytest.mark.parametrize(("host", "scope"), CASES)
def test_a_backup_name_planted_as_a_link_is_refused_and_the_file_it_points_to_is_left_alone(
    host: str, scope: str, home: Path
) -> None:
    path = host_file(host, scope, home)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(planted(host))
    backup = Path(str(path) + BACKUP_SUFFIX)
    backup.symlink_to(home / ".bashrc")
    result = setup(host, "--scope", scope)
    assert result.exit_code == 1, result.output
    assert f"{backup} is a symbolic link" in result.output and f"rm {backup}" in result.output
    assert "nothing was written" in result.output and "Traceback" not in result.output
    assert (home / ".bashrc").read_text() == BASHRC
    assert path.read_text() == planted(host) and backup.is_symlink()


@pytest.mark.parametrize(("host", "scope"), PROJECT)
def test_a_project_file_planted_as_a_link_is_refused_and_its_target_left_alone(
    host: str, scope: str, home: Path
) -> None:
    victim = home / "victim.json"
    victim.write_text(planted(host))
    path = host_file(host, scope, home)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(victim)
    result = setup(host, "--scope", scope)
    assert result.exit_code == 1
    assert f"{path} is a symbolic link to {victim}" in result.output
    assert f"--follow-link {victim}" in result.output and "Traceback" not in result.output
    assert victim.read_text() == planted(host) and not Path(str(victim) + BACKUP_SUFFIX).exists()
    assert sorted(p.name for p in home.iterdir()) == [".bashrc", "victim.json"]


def _in_a_folder(host: str) -> bool:
    return len(HOSTS[host].scopes["project"](Path("/p"), Path("/h"), {}).relative_to("/p").parts) > 1


@pytest.mark.parametrize("host", [h for h, _ in PROJECT if _in_a_folder(h)])
def test_a_project_folder_planted_as_a_link_is_refused_and_nothing_is_written_where_it_points(
    host: str, home: Path
) -> None:
    path = host_file(host, "project", home)
    elsewhere = home / "elsewhere"
    elsewhere.mkdir()
    path.parent.symlink_to(elsewhere)
    result = setup(host, "--scope", "project")
    assert result.exit_code == 1
    assert f"{path} is inside {path.parent}, a symbolic link to {elsewhere}" in result.output
    assert list(elsewhere.iterdir()) == []


def test_a_link_the_user_names_is_written_through_and_its_backup_is_a_new_file(home: Path) -> None:
    real = home / "dotfiles" / "mcp.json"
    real.parent.mkdir()
    real.write_text('{"mcpServers": {}}\n')
    (Path.cwd() / ".cursor").mkdir()
    (Path.cwd() / ".cursor" / "mcp.json").symlink_to(real)
    result = setup("cursor", "--scope", "project", "--follow-link", str(real))
    assert result.exit_code == 0, result.output
    assert "toolshell" in json.loads(real.read_text())["mcpServers"]
    backup = Path(str(real) + BACKUP_SUFFIX)
    assert backup.read_text() == '{"mcpServers": {}}\n' and not backup.is_symlink()
    assert (Path.cwd() / ".cursor" / "mcp.json").is_symlink()


def test_naming_another_file_does_not_let_a_link_through(home: Path) -> None:
    victim = home / "victim.json"
    victim.write_text("{}\n")
    Path(".mcp.json").symlink_to(victim)
    result = setup("claude-code", "--scope", "project", "--follow-link", str(home / ".bashrc"))
    assert result.exit_code == 1 and victim.read_text() == "{}\n"


def test_an_earlier_backup_is_kept_and_the_new_one_takes_the_next_number(home: Path) -> None:
    path = home / ".cursor" / "mcp.json"
    path.parent.mkdir()
    path.write_text('{"mcpServers": {}}\n')
    path.chmod(0o600)
    Path(str(path) + BACKUP_SUFFIX).write_text("the first run's\n")
    Path(str(path) + BACKUP_SUFFIX + ".1").write_text("the second run's\n")
    result = setup("cursor")
    assert result.exit_code == 0
    newest = Path(str(path) + BACKUP_SUFFIX + ".2")
    assert f"(the previous file: {newest})" in result.output
    assert newest.read_text() == '{"mcpServers": {}}\n' and newest.stat().st_mode & 0o777 == 0o600
    assert Path(str(path) + BACKUP_SUFFIX).read_text() == "the first run's\n"
    assert Path(str(path) + BACKUP_SUFFIX + ".1").read_text() == "the second run's\n"
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_a_file_written_twice_in_one_run_keeps_one_backup_of_what_it_held_before_the_run(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text("original\n")
    writer = Writer()
    first = writer.write(path, "step one\n")
    second = writer.write(path, "step two\n")
    assert first == second == Path(str(path) + BACKUP_SUFFIX)
    assert first.read_text() == "original\n" and path.read_text() == "step two\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["settings.json", "settings.json.toolshell.bak"]
