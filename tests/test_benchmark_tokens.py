"""benchmarks/tokens.py: the token counting, and a few tasks run both ways on the real servers."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path

import mcp_types as types
import pytest

from _ci_support import requires

pytest.importorskip("bpe_openai", reason="pip install bpe-openai (the benchmark's offline o200k tokenizer)")
sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
import tokens  # noqa: E402 - benchmarks/ is a folder of scripts, put on the path just above
from tasks.catalog import TASKS  # noqa: E402

NODE_BIN = Path(__file__).parent / "node" / "node_modules" / ".bin"
SERVERS_MISSING = not (
    (NODE_BIN / "mcp-server-memory").exists()
    and shutil.which("node")
    and shutil.which("mcp-server-git")
    and shutil.which("mcp-server-time")
)
needs_servers = requires(
    not SERVERS_MISSING, reason="run `npm install --prefix tests/node` and `pip install -e '.[dev]'`"
)


def test_tokens_are_counted_with_o200k_base() -> None:
    # The counts tiktoken's own o200k_base gives for the same strings.
    assert tokens.tokens("hello world") == 2
    assert tokens.tokens('{"name": "mcp__time__convert_time", "input": {"time": "15:00"}}') == 23
    assert tokens.tokens("Grüße, 世界! 🚀") == 8


def test_the_tokenizer_needs_no_network_and_no_cache() -> None:
    blocked = (
        "import socket\n"
        "def refuse(*a, **k): raise OSError('network blocked')\n"
        "socket.socket.connect = refuse\n"
        "socket.create_connection = refuse\n"
        "import bpe_openai\n"
        "print(len(bpe_openai.get_encoding('o200k_base').encode('hello world')))\n"
    )
    env = {"TIKTOKEN_CACHE_DIR": "/nonexistent", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", blocked], env=env, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "2\n"), done.stderr


def test_each_turn_resends_the_prefix_the_definitions_and_every_earlier_call_and_result() -> None:
    talk = tokens.Conversation(prefix=10, definitions=100, calls=[5, 7], results=[20, 30])
    # Three requests: before the first call, after it, and the answering one after the second.
    assert talk.turns == 3
    assert talk.cumulative() == 110 + (110 + 25) + (110 + 25 + 37)
    assert talk.cumulative(definitions=1000) == 1010 + (1010 + 25) + (1010 + 25 + 37)


def test_fifty_servers_repeat_every_definition_under_renamed_servers() -> None:
    tool = types.Tool(name="get_sum", description="Adds", input_schema={"type": "object"})
    listed = {"everything": [tool], "time": [tool]}
    names = [d["name"] for d in tokens.direct_definitions(listed, copies=3)]
    assert names == [
        "mcp__everything__get_sum",
        "mcp__time__get_sum",
        "mcp__everything-2__get_sum",
        "mcp__time-2__get_sum",
        "mcp__everything-3__get_sum",
        "mcp__time-3__get_sum",
    ]


def test_every_task_has_its_script_checked_in_beside_it() -> None:
    assert len(TASKS) >= 10
    assert {t.kind for t in TASKS} >= {"lookup", "search then call", "chain", "fan-out", "filter"}
    assert all(t.script_path.is_file() and t.script().strip() for t in TASKS)


@pytest.mark.real
@pytest.mark.anyio
@needs_servers
async def test_a_lookup_and_a_chain_reach_the_right_answer_both_ways_and_a_wrong_answer_is_caught(
    tmp_path: Path,
) -> None:
    chosen = {t.name: t for t in TASKS if t.name in ("config-port", "treasure-hunt")}
    wrong = dataclasses.replace(chosen["config-port"], truth=lambda w: "80")
    result, outcomes = await tokens.measure(tmp_path, [*chosen.values(), wrong])
    assert [o.correct for o in outcomes] == [
        {"direct": True, "toolshell": True},
        {"direct": True, "toolshell": True},
        {"direct": False, "toolshell": False},
    ]
    hunt = outcomes[1]
    # Four reads, one turn each, then the answer; toolshell: a --help, the script, the answer.
    assert (hunt.direct.turns, hunt.shell.turns) == (5, 3)
    assert hunt.direct.cumulative() > 5 * hunt.direct.definitions
    five, fifty = result["totals"]["5_servers"], result["totals"]["50_servers"]
    assert 9.9 < fifty["definitions"]["direct"] / five["definitions"]["direct"] < 10.2
    assert five["definitions"]["ratio"] > 15
    assert result["tasks"][1]["ratio"] == hunt.ratio()


@pytest.mark.real
@needs_servers
def test_the_documented_command_prints_the_table_and_writes_the_results(tmp_path: Path) -> None:
    script = Path(tokens.__file__)
    out = tmp_path / "results.json"
    command = [sys.executable, str(script), "--only", "treasure-hunt", "changed-files"]
    done = subprocess.run(
        [*command, "--world", str(tmp_path / "world"), "--out", str(out)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "treasure-hunt" in done.stdout and "50 servers: definitions" in done.stdout
    written = json.loads(out.read_text())
    assert [t["task"] for t in written["tasks"]] == ["treasure-hunt", "changed-files"]
    assert all(t["correct"] == {"direct": True, "toolshell": True} for t in written["tasks"])
