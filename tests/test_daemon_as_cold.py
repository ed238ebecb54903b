"""A daemon answers exactly as a cold command would (issue 22, item 5): an edit saved while it
reloads is a change it sees; the trust records a cold command reads (`$TOOLSHELL_STATE_DIR`) are
the ones it reads; and a config it was started with by name (`--config`, `$TOOLSHELL_CONFIG`) never
serves a plain command, for which the same file is an untrusted checkout config. Every warm answer
here is compared with the cold one, run the same way with `--no-daemon`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from _daemon_support import ENTRY, Place, placed

EDITS_ON_START = textwrap.dedent(
    """
    import sys
    from mcp.server.mcpserver import MCPServer
    config, rule = sys.argv[1], "\\n[approval]\\ndeny = [\\"counted:*\\"]\\n"
    with open(config) as f:
        text = f.read()
    if rule not in text:  # a `git pull` that lands while the daemon opens its servers
        with open(config, "a") as f:
            f.write(rule)
    server = MCPServer("editor", log_level="WARNING")

    @server.tool()
    def noop() -> str:
        return ""

    server.run()
    """
)


@pytest.fixture
def place(tmp_path: Path) -> Iterator[Place]:
    with placed(tmp_path) as made:
        yield made


def _toolshell(place: Place, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ENTRY, *args], cwd=place.cwd, capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "XDG_CONFIG_HOME": str(place.root / "no-user-config"), **env},
    )  # fmt: skip


def _warm_and_cold(place: Place, command: str, *options: str, env: dict[str, str]) -> tuple[object, object]:
    """The same command through the daemon (if it serves it) and with `--no-daemon`."""
    warm = _toolshell(place, "run", *options, "-c", command, env=env)
    cold = _toolshell(place, "run", "--no-daemon", *options, "-c", command, env=env)
    return _answer(warm), _answer(cold)


def _answer(done: subprocess.CompletedProcess[str]) -> tuple[int, str, str]:
    """What a command answered, less the line a cold one prints while its servers start."""
    said = [line for line in done.stderr.splitlines(keepends=True) if not line.startswith(_WAITING)]
    return done.returncode, done.stdout, "".join(said)


_WAITING = "toolshell: waiting up to"


def _served(place: Place, *options: str, env: dict[str, str]) -> int:
    """How many requests the daemon for these options has served."""
    shown = _toolshell(place, "daemon", "status", "--json", *options, env=env)
    return int(json.loads(shown.stdout).get("requests", 0))


def test_a_deny_rule_saved_while_the_daemon_reloads_is_applied_warm_as_cold(place: Place) -> None:
    options = ("--config", str(place.config), "--state-dir", str(place.state))
    assert _toolshell(place, "daemon", "start", *options, env={}).returncode == 0
    editor = place.root / "editor.py"
    editor.write_text(EDITS_ON_START)
    server = f'[[mcp.servers]]\nname = "editor"\ncommand = {json.dumps(sys.executable)}\n'
    server += f"args = [{json.dumps(str(editor))}, {json.dumps(str(place.config))}]\n"
    place.write_config(["counted"], extra=server)
    reloaded = _toolshell(place, "run", *options, "-c", "tools counted ping", env={})
    assert reloaded.stdout == "pong from counted\n", "served from the bytes read before the edit landed"
    assert "deny" in place.config.read_text(), "the edit landed while the daemon opened its servers"
    warm, cold = _warm_and_cold(place, "tools counted ping", *options, env={})
    assert warm == cold and cold[0] != 0 and "pong" not in str(cold[1]), cold
    assert _served(place, *options, env={}) == 2, "the daemon answered it: warm, not a fallback"


def test_a_checkout_config_trusted_in_another_state_dir_is_ignored_warm_as_cold(place: Place) -> None:
    local = place.cwd / "toolshell.toml"
    place.write_config(["counted"], path=local)
    trusting = {"TOOLSHELL_STATE_DIR": str(place.root / "trusted-here")}
    assert _toolshell(place, "config", "trust", "--yes", env=trusting).returncode == 0
    options = ("--state-dir", str(place.state))
    assert _toolshell(place, "daemon", "start", *options, env=trusting).returncode == 0
    assert _warm_and_cold(place, "tools counted ping", *options, env=trusting)[0] == (0, "pong from counted\n", "")
    elsewhere = {"TOOLSHELL_STATE_DIR": str(place.root / "trusted-nowhere")}
    warm, cold = _warm_and_cold(place, "tools counted ping", *options, env=elsewhere)
    assert warm == cold and "ignoring toolshell.toml" in str(cold[2]) and cold[0] != 0, cold
    assert _served(place, *options, env=trusting) == 1, "the daemon of the other trust records served nothing"


@pytest.mark.parametrize("named", ["--config", "TOOLSHELL_CONFIG"])
def test_a_daemon_started_with_a_named_checkout_config_never_serves_a_plain_command_there(
    place: Place, named: str
) -> None:
    local = place.cwd / "toolshell.toml"
    place.write_config(["counted"], path=local)
    options = ("--state-dir", str(place.state))
    by_name = ("--config", "toolshell.toml") if named == "--config" else ()
    env = {"TOOLSHELL_CONFIG": "toolshell.toml"} if named == "TOOLSHELL_CONFIG" else {}
    assert _toolshell(place, "daemon", "start", *by_name, *options, env=env).returncode == 0
    assert _warm_and_cold(place, "tools counted ping", *by_name, *options, env=env)[0] == (0, "pong from counted\n", "")
    warm, cold = _warm_and_cold(place, "tools counted ping", *options, env={})
    assert warm == cold and "ignoring toolshell.toml" in str(cold[2]) and cold[0] != 0, cold
    place.write_config(["counted", "pulled"], path=local)  # a `git pull` adds a server
    warm, cold = _warm_and_cold(place, "tools pulled ping", *options, env={})
    assert warm == cold and cold[0] != 0 and place.started("pulled") == 0, cold
    assert _served(place, *by_name, *options, env=env) == 1, "only the command that named the file was served"


AUDITED_LOAD = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    target, evil = os.path.realpath(sys.argv[1]), sys.argv[2]
    opened = []

    def rewrite_after_the_first_read(event, args):
        if event == "open" and isinstance(args[0], (str, os.PathLike)) and not opened[1:]:
            if os.path.realpath(os.fspath(args[0])) == target:
                opened.append(True)
                if len(opened) == 2:  # the file changes between a first and a second read
                    Path(target).write_text(evil)

    sys.addaudithook(rewrite_after_the_first_read)
    from toolshell import config
    print(" ".join(s.name for s in config.load().mcp.servers) or "-")
    """
)


def test_a_checkout_config_is_checked_for_trust_and_parsed_from_the_same_bytes(place: Place) -> None:
    local = place.cwd / "toolshell.toml"
    place.write_config(["counted"], path=local)
    assert _toolshell(place, "config", "trust", "--yes", env={}).returncode == 0
    evil = local.read_text() + '[[mcp.servers]]\nname = "evil"\ncommand = "/bin/true"\n'
    program = place.root / "audited.py"
    program.write_text(AUDITED_LOAD)
    env = {**os.environ, "XDG_CONFIG_HOME": str(place.root / "no-user-config")}
    done = subprocess.run(
        [sys.executable, str(program), str(local), evil], cwd=place.cwd, capture_output=True, text=True,
        timeout=60, check=False, env=env,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (0, "counted\n"), done.stderr
