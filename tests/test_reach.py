"""Start only what a script can reach (issue 16, item 2): a script whose every `tools` call is
written out starts only the servers those calls name, none for `echo hi`, and prints no waiting line."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from toolshell.config import load_text
from toolshell.policy.reach import servers_a_script_names

CONFIG = load_text(
    '[[mcp.servers]]\nname = "github"\ncommand = "gh-mcp"\n[[mcp.servers]]\nname = "git"\ncommand = "git-mcp"\n'
)


@pytest.mark.parametrize(
    ("script", "named"),
    [
        ("echo hi", set()),
        ("tools github get-pull number=1 | jq .title", {"github"}),
        ("tools mcp_git__git_log max_count=1; tools GitHub list-pulls", {"git", "github"}),
        ("tools web-fetch url=https://example.com", set()),
        ("tools --help", None),
        ("tools search commit", None),
        ("tools scripts nightly", None),
        ('eval "$x"', None),
        ('name=github; tools "$name" get-pull', None),
    ],
)
def test_the_servers_a_script_names_are_read_only_when_every_call_is_written_out(
    script: str, named: set[str] | None
) -> None:
    assert servers_a_script_names(script, CONFIG) == named


SLOW = textwrap.dedent(
    """
    import pathlib, sys, time
    from mcp.server.mcpserver import MCPServer
    from mcp_types import ToolAnnotations
    with open(sys.argv[1], "a") as log:  # each start is observable
        log.write("started\\n")
    time.sleep(float(sys.argv[2]))  # a slow start
    server = MCPServer("slow", log_level="WARNING")

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def ping() -> str:
        return "pong"

    server.run()
    """
)


def _slow_config(tmp_path: Path) -> tuple[Path, Path]:
    """A config of one server that takes 3 s to start, and the file it logs each start to."""
    script, log = tmp_path / "slow.py", tmp_path / "starts.log"
    script.write_text(SLOW)
    config = tmp_path / "toolshell.toml"
    config.write_text(
        f'[[mcp.servers]]\nname = "slow"\ncommand = {json.dumps(sys.executable)}\n'
        f'args = [{json.dumps(str(script))}, {json.dumps(str(log))}, "3"]\n'
    )
    return config, log


def test_echo_hi_starts_no_server_and_waits_for_none_while_a_call_starts_the_one_it_names(tmp_path: Path) -> None:
    config, log = _slow_config(tmp_path)
    exe = str(Path(sys.executable).parent / "toolshell")

    def run(text: str) -> subprocess.CompletedProcess[str]:
        argv = [exe, "run", "--config", str(config), "--state-dir", str(tmp_path / "state"), "-c", text]
        return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)

    hi = run("echo hi")
    assert (hi.returncode, hi.stdout, hi.stderr) == (0, "hi\n", ""), "no waiting line, nothing started"
    assert not log.exists()
    called = run("tools slow ping")
    assert called.stdout == "pong\n" and log.read_text() == "started\n"


SAVED = {
    "nightly": "tools github get-pull number=1 | jq .title",
    "outer": "tools scripts nightly; tools git git-log",
    "loop": "tools scripts loop",
    "dynamic": 'tools "$1" get-pull',
}


@pytest.mark.parametrize(
    ("script", "named"),
    [
        ("tools scripts nightly", {"github"}),
        ("tools scripts outer", {"github", "git"}),
        ("tools scripts", set()),
        ("tools scripts list", set()),
        ("tools scripts nightly --help", set()),
        ("tools scripts delete nightly", set()),
        ("tools scripts missing", None),
        ("tools scripts loop", None),
        ("tools scripts dynamic", None),
        ('x=1; eval "tools github get-pull number=1"; tools git git-log', None),
        ('x=1; eval "tools github get-pull number=1"; tools git git-log', None),  # again: from the scan cache
    ],
)
def test_a_saved_script_run_counts_for_what_its_body_names(script: str, named: set[str] | None) -> None:
    assert servers_a_script_names(script, CONFIG, SAVED.get) == named


def test_toolshell_scripts_name_starts_only_what_the_saved_script_names(tmp_path: Path) -> None:
    config, log = _slow_config(tmp_path)
    exe = str(Path(sys.executable).parent / "toolshell")

    def scripts(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        argv = [exe, "scripts", "--config", str(config), "--state-dir", str(tmp_path / "state"), *args]
        return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=120, check=False)

    assert scripts("save", "quiet", "--description", "says hi", stdin="echo hi\n").returncode == 0
    assert scripts("save", "pinger", "--description", "pings", stdin="tools slow ping\n").returncode == 0
    quiet = scripts("quiet")
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "hi\n", ""), "no waiting line, nothing started"
    assert not log.exists()
    pinged = scripts("pinger")
    assert pinged.stdout == "pong\n" and log.read_text() == "started\n"
