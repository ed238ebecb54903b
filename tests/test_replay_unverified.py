# ruff: noqa: F811  (the store fixtures are imported from _store_support and named as parameters)
"""A replay believes only what it can verify, on both store engines. Whoever can write the store
but holds no key ring ages a live task's heartbeat and changes (or removes) one record: the
takeover stops at that call, naming it, and never takes it for a call still in flight (it was
found making call 1 again: call log `[1, 2, 1, 3, 4]`). A parked task's stored answer goes to the
question about the same call only, not to the same message asked about another call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from _replay_support import LOG_ENV, calls, counter
from _store_support import ENGINES, postgres_server, store_url  # noqa: F401  (fixtures)
from _tasks_support import CreatedTask, TasksClient, get_task, until_status, update_task
from test_tasks_replay import _body, _held_task, _never, _serving
from toolshell.config import Config
from toolshell.frontends.serve.server import build_server
from toolshell.host import Host
from toolshell.store.engines import open_store
from toolshell.store.keys import new_key
from toolshell.store.tasks import TaskRows, id_hash

pytestmark = pytest.mark.anyio
FOUR = "for i in 1 2 3 4; do tools counter tick n=$i; done; echo done"
TAMPER = {
    "changed": "UPDATE run_calls SET record = SUBSTR(record, 1, 40) || CASE WHEN SUBSTR(record, 41, 1) = 'A'"
    " THEN 'B' ELSE 'A' END || SUBSTR(record, 42) WHERE run_key = ? AND ordinal = 1",
    "removed": "DELETE FROM run_calls WHERE run_key = ? AND ordinal = 1",
}
SAYS = {
    "changed": "its record in the store does not open",
    "removed": "call 2's record counts 1 recorded calls before it and the store holds 0",
}


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
@pytest.mark.parametrize("tamper", TAMPER)
async def test_a_record_changed_or_removed_by_a_store_writer_stops_the_takeover_at_that_call(
    store_url: str, tamper: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _serving(store_url, tmp_path, monkeypatch) as (host, client):
        task_id = await _held_task(host, client, tmp_path, FOUR, hold=3, recorded=2)
        host.store.execute(TAMPER[tamper], (id_hash(task_id),))
        await get_task(client.session, task_id)  # taken over here
        (tmp_path / "calls.log.hold-3").unlink()
        done = await until_status(client.session, task_id, "completed", "failed")
    body = _body(done)
    [error] = [json.loads(line)["error"] for line in body["stderr"].splitlines() if line.startswith("{")]
    assert error["code"] == "stopped"
    assert 'stopped at call 1 `tools counter tick {"n":1}`' in error["message"] and SAYS[tamper] in error["message"]
    assert body["exit_code"] == 1 and "done" not in body["stdout"]
    made = calls(tmp_path / "calls.log")
    assert made[:2] == [1, 2] and made.count(1) == 1 and 4 not in made, "call 1 was not made again, nothing after it"


def _two_hosts(store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    monkeypatch.setenv(LOG_ENV, str(tmp_path / "calls.log"))
    monkeypatch.setenv("TOOLSHELL_STATE_KEYS", new_key())
    (tmp_path / "in").mkdir()
    config = Config.model_validate(
        {
            "serve": {"heartbeat_seconds": 1, "tasks": {"after_seconds": 0}},
            "approval": {"park_after_seconds": 1},
            "shell": {"mounts": [{"host": str(tmp_path / "in"), "path": "/in"}]},  # read-only: replayed
        }
    )

    def opened(name: str) -> Any:
        return Host.open(config, store=open_store(store_url), state_dir=tmp_path / name, servers={"counter": counter()})

    return opened("one"), opened("two")


async def _parked(host: Host, client: Client, script: str) -> tuple[str, str]:
    """Start `script` as a task and wait until it is parked at its question; its id and the key."""
    created = await client.session.call_tool("bash", {"script": script}, allow_claimed=True)
    assert isinstance(created, CreatedTask), created
    await until_status(client.session, created.task_id, "input_required")
    rows = TaskRows(host.store)
    with anyio.fail_after(30):
        while not (row := rows.get(id_hash(created.task_id))) or not row.parked:  # noqa: ASYNC110  (a store row)
            await anyio.sleep(0.2)
    [key] = row.input_requests or {}
    return created.task_id, key


ONCE = {"action": "accept", "content": {"answer": "once"}}


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_a_parked_answer_is_not_taken_by_the_same_question_about_another_call(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first run asks about `drop n=5` at call 2; the replay, seeing a file that appeared
    meanwhile, makes another call 2 and asks the same words at call 3: the person is asked again."""
    drop = "d=drop; tools counter $d n=5"  # built at run time: asked when it is made, not before the start
    script = f"tools counter tick n=1; if [ -e /in/flag ]; then tools counter tick n=9; fi; {drop}"
    one_cm, two_cm = _two_hosts(store_url, tmp_path, monkeypatch)
    async with (
        one_cm as one,
        two_cm as two,
        Client(build_server(one, []), extensions=[TasksClient()], elicitation_callback=_never) as on_one,
        Client(build_server(two, []), extensions=[TasksClient()], elicitation_callback=_never) as on_two,
    ):
        task_id, key = await _parked(one, on_one, script)
        (tmp_path / "in" / "flag").touch()
        await update_task(on_two.session, task_id, {key: ONCE})
        asked_again = await until_status(on_two.session, task_id, "input_required", "completed", "failed")
        made = calls(tmp_path / "calls.log")
        [again] = asked_again.input_requests or {}
        await update_task(on_two.session, task_id, {again: ONCE})
        done = await until_status(on_two.session, task_id, "completed", "failed")
    assert key.startswith("c2.") and again.startswith("r1.c3."), (key, again)
    assert made == [1, 9], "drop did not run on the answer given about another call"
    assert done.status == "completed" and calls(tmp_path / "calls.log") == [1, 9, -5]


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_a_task_parked_at_the_before_start_check_resumes_with_its_answer_without_asking_twice(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one_cm, two_cm = _two_hosts(store_url, tmp_path, monkeypatch)
    async with (
        one_cm as one,
        two_cm as two,
        Client(build_server(one, []), extensions=[TasksClient()], elicitation_callback=_never) as on_one,
        Client(build_server(two, []), extensions=[TasksClient()], elicitation_callback=_never) as on_two,
    ):
        task_id, key = await _parked(one, on_one, "tools counter drop n=2; tools counter tick n=3")
        await update_task(on_two.session, task_id, {key: ONCE})
        done = await until_status(on_two.session, task_id, "completed", "failed", "input_required")
    assert key.startswith("c0."), key
    assert done.status == "completed", done
    assert _body(done)["stdout"] == "dropped 2\ntick 3\n" and calls(tmp_path / "calls.log") == [-2, 3]
