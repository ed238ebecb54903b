"""A checkout's `toolshell.toml` is trusted as the path found in the working directory, never as the
file a symlink points to; its relative `cwd`/`args` run in the directory it was trusted for."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import sys
from pathlib import Path

from _cli_support import toolshell
from toolshell.config import load_text
from toolshell.config.loading import rebase

NOTE = (
    "toolshell: ignoring toolshell.toml in the working directory (it is not trusted, and it could start "
    "programs); read it, then run `toolshell config trust toolshell.toml` to use it"
)


def _checkout(path: Path) -> Path:
    """A directory whose config starts `mark.py` from that directory: the marker shows where it ran."""
    path.mkdir()
    (path / "toolshell.toml").write_text(
        f'[[mcp.servers]]\nname = "evil"\ncommand = {json.dumps(sys.executable)}\nargs = ["mark.py"]\n'
    )
    (path / "mark.py").write_text("open('ran', 'w').close()\n")
    return path


def _own_script(path: Path) -> Path:
    """A directory with its own `mark.py` (and no config of its own)."""
    path.mkdir()
    (path / "mark.py").write_text("open('ran', 'w').close()\n")
    return path


def test_a_symlink_to_a_trusted_config_is_ignored_with_the_usual_message(tmp_path: Path) -> None:
    a = _checkout(tmp_path / "a")
    b = _own_script(tmp_path / "b")
    (b / "toolshell.toml").symlink_to(a / "toolshell.toml")
    assert toolshell("config", "trust", "--yes", cwd=a).returncode == 0
    in_b = toolshell("servers", "--json", cwd=b)
    assert NOTE in in_b.stderr.splitlines()
    assert "evil" not in [row["name"] for row in json.loads(in_b.stdout)]
    assert not (b / "ran").exists()
    in_a = toolshell("servers", "--json", cwd=a)  # the trusted file itself is still used
    assert "ignoring" not in in_a.stderr
    assert (a / "ran").exists()
    assert "Traceback" not in in_a.stderr + in_b.stderr


def test_a_symlink_trusted_as_itself_runs_in_its_own_directory_and_an_edit_of_its_target_withdraws_it(
    tmp_path: Path,
) -> None:
    a = _checkout(tmp_path / "a")
    b = _own_script(tmp_path / "b")
    (b / "toolshell.toml").symlink_to(a / "toolshell.toml")
    trusted = toolshell("config", "trust", "--yes", cwd=b)
    assert trusted.stdout.splitlines()[-1].startswith(f"trusted {b.resolve() / 'toolshell.toml'} (sha256 ")
    toolshell("servers", "--json", cwd=b)
    assert ((b / "ran").exists(), (a / "ran").exists()) == (True, False)
    with (a / "toolshell.toml").open("a") as f:
        f.write("# edited\n")
    after = toolshell("run", "-c", "echo hi", cwd=b)
    assert "(it changed since it was trusted)" in after.stderr
    assert after.stdout == "hi\n"


def test_a_symlinked_working_directory_is_the_directory_it_points_to(tmp_path: Path) -> None:
    a = _checkout(tmp_path / "a")
    link = tmp_path / "link"
    link.symlink_to(a, target_is_directory=True)
    trusted = toolshell("config", "trust", str(link / "toolshell.toml"), "--yes", cwd=tmp_path)
    assert trusted.stdout.splitlines()[-1].startswith(f"trusted {a.resolve() / 'toolshell.toml'} (sha256 ")
    used = toolshell("servers", "--json", cwd=link)  # the process's working directory is `a` itself
    assert "ignoring" not in used.stderr
    assert (a / "ran").exists()


def test_a_trust_record_from_before_directories_were_kept_still_trusts_a_regular_file(tmp_path: Path) -> None:
    a = _checkout(tmp_path / "a")
    b = _own_script(tmp_path / "b")
    (b / "toolshell.toml").symlink_to(a / "toolshell.toml")
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    db = sqlite3.connect(state / "toolshell.db")
    db.execute("CREATE TABLE config_trust (path TEXT PRIMARY KEY, sha256 TEXT NOT NULL, trusted_at REAL NOT NULL)")
    digest = hashlib.sha256((a / "toolshell.toml").read_bytes()).hexdigest()
    db.execute("INSERT INTO config_trust VALUES (?, ?, 0)", (str((a / "toolshell.toml").resolve()), digest))
    db.commit()
    db.close()
    (state / "toolshell.db").chmod(0o600)
    env = {"TOOLSHELL_STATE_DIR": str(state)}
    assert "ignoring" not in toolshell("servers", "--json", cwd=a, env=env).stderr
    assert (a / "ran").exists()
    assert NOTE in toolshell("servers", "--json", cwd=b, env=env).stderr.splitlines()  # re-asked
    assert not (b / "ran").exists()


def test_a_trusted_checkouts_relative_cwd_and_command_are_anchored_in_its_directory(tmp_path: Path) -> None:
    text = (
        '[[mcp.servers]]\nname = "local"\ncommand = "./bin/srv"\ncwd = "tools"\n'
        '[[mcp.servers]]\nname = "npx"\ncommand = "npx"\n'
    )
    servers = rebase(load_text(text), tmp_path).mcp.servers
    assert [(s.command, s.cwd) for s in servers] == [
        (str(tmp_path / "tools" / "bin" / "srv"), str(tmp_path / "tools")),
        ("npx", str(tmp_path)),
    ]
