"""benchmarks/filesystem.py: two tasks run both ways on the real server-filesystem, and its verifier."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("bpe_openai", reason="pip install bpe-openai (the benchmark's offline o200k tokenizer)")
sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
import filesystem  # noqa: E402 - benchmarks/ is a folder of scripts, put on the path just above
from fstasks import world  # noqa: E402
from fstasks.catalog import TASKS  # noqa: E402
from fstasks.task import Caller  # noqa: E402

NODE_BIN = Path(__file__).parent / "node" / "node_modules" / ".bin"
needs_server = pytest.mark.skipif(
    not ((NODE_BIN / "mcp-server-filesystem").exists() and shutil.which("node")),
    reason="run `npm install --prefix tests/node`",
)
BY_NAME = {t.name: t for t in TASKS}


def test_every_task_has_its_script_and_starts_from_a_folder_that_does_not_pass_its_verifier(tmp_path: Path) -> None:
    assert len(TASKS) == 10
    for task in TASKS:
        assert task.script().strip(), task.name
        files = world.build(tmp_path / task.name)
        # Nothing done yet: every task's verifier must see that, or it would pass an agent that did nothing.
        assert task.verify(files, ""), task.name


def test_the_verifier_names_a_copy_that_lost_its_trailing_newline_and_a_stray_file(tmp_path: Path) -> None:
    task = BY_NAME["copy-exact"]
    files = world.build(tmp_path)
    (files / "backup" / "todo.txt").write_text(world.todo_text().rstrip("\n"))
    assert task.verify(files, "") == ["backup/todo.txt: 71 bytes, expected 72; from byte 71: b'' is not b'\\n'"]
    (files / "backup" / "todo.txt").write_text(world.todo_text())
    assert task.verify(files, "") == []
    (files / "backup" / "extra.txt").write_text("x")
    assert task.verify(files, "") == ["backup/extra.txt: not expected"]


async def _copy_through_substitution(call: Caller, files: Path) -> str:
    """What `content="$(cat file)"` sends: the text without its trailing newline."""
    text = await call("read_text_file", {"path": f"{files}/notes/todo.txt"})
    await call("write_file", {"path": f"{files}/backup/todo.txt", "content": text.rstrip("\n")})
    return ""


@pytest.mark.real
@pytest.mark.anyio
@needs_server
async def test_two_tasks_are_done_exactly_both_ways_and_a_lossy_copy_is_caught(tmp_path: Path) -> None:
    lossy = dataclasses.replace(BY_NAME["copy-exact"], direct=_copy_through_substitution)
    result, first = await filesystem.measure(
        tmp_path, [BY_NAME["copy-exact"], BY_NAME["sort-inbox"], lossy], 1, ("direct", "toolshell")
    )
    copy, inbox, caught = result["tasks"]
    assert (copy["direct"]["success"], copy["toolshell"]["success"]) == (True, True)
    assert (inbox["direct"]["success"], inbox["toolshell"]["success"]) == (True, True)
    assert caught["direct"]["success"] is False and caught["direct"]["problems"][0].startswith("backup/todo.txt: ")
    # Direct: a listing, three folders, ten moves, then the answer; toolshell: the script, the answer
    # (the `bash` description lists the server's tools with their arguments: no help turn).
    assert (inbox["direct"]["turns"], inbox["toolshell"]["turns"]) == (15, 2)
    assert inbox["toolshell"]["discovery_turns"] == 0
    totals = filesystem.totals(result["tasks"][:2], "toolshell")
    assert totals["success"] == "2/2"
    assert totals["cumulative"]["direct"] == copy["direct"]["cumulative"] + inbox["direct"]["cumulative"]
    # The transcript is what was counted: the one script, that wrote with key=@file.
    turns = first["toolshell"][0].talk.transcript
    assert [json.loads(call)["input"]["script"].splitlines()[-1] for call, _ in turns] == [
        "tools filesystem write-file path=$F/backup/todo.txt content=@todo.txt > /dev/null",
    ]


@pytest.mark.real
@needs_server
def test_the_documented_command_prints_the_table_and_writes_the_results(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    command = [
        sys.executable,
        filesystem.__file__,
        "--rounds",
        "1",
        "--no-before",
        "--only",
        "db-timeout",
        "largest-media",
    ]
    done = subprocess.run(
        [*command, "--world", str(tmp_path / "world"), "--out", str(out)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "largest-media" in done.stdout and "targets:" in done.stdout
    written = json.loads(out.read_text())
    assert [t["task"] for t in written["tasks"]] == ["db-timeout", "largest-media"]
    assert written["tasks"][1]["toolshell"]["answer"] == BY_NAME["largest-media"].answer
