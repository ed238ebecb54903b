# ruff: noqa: F811  (the engine fixtures are imported from _store_support and named as parameters)
"""`serve --http --processes N` (issue 31): N worker processes behind one port act as one server.
Calls spread over the processes, a shell kept by handle is found whichever process takes the next
call (on both store engines), `/readyz` answers for the machine, SIGTERM to the parent drains
every worker and the parent exits 0, and a worker that dies is started again."""

from __future__ import annotations

import json
import mmap
import os
import signal
import socket
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from click.testing import CliRunner

from _fleet_support import MCP_HEADERS, META, TOKEN
from _serve_auth_support import Served, serving
from _store_support import ENGINES, postgres_server, store_url  # noqa: F401  (fixtures)
from toolshell.frontends.cli import main
from toolshell.frontends.serve import processes
from toolshell.frontends.serve.processes import WorkerSlot, listening_sockets
from toolshell.store.keys import new_key

pytestmark = pytest.mark.anyio
CONFIG = "[serve]\ndrain_seconds = 20\n"


def _env(store: str) -> dict[str, str]:
    env = {"TOOLSHELL_SERVE_TOKEN": TOKEN, "TOOLSHELL_STATE_KEYS": new_key()}
    return env | {"TOOLSHELL_STATE_URL": store}


async def _bash(url: str, script: str, shell: str | None = None) -> tuple[dict[str, Any], str]:
    """One 2026-07-28 `bash` call on a connection of its own; its result and the answering pid."""
    arguments = {"script": script, **({"shell": shell} if shell else {})}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    body["params"] = {"name": "bash", "arguments": arguments, "_meta": META}  # type: ignore[assignment]
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {TOKEN}", "Mcp-Method": "tools/call", "Mcp-Name": "bash"}
    async with httpx2.AsyncClient(timeout=60) as http:
        response = await http.post(url, content=json.dumps(body), headers=headers)
    text = response.text
    if "data:" in text:
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:") and '"result"' in line)
    return json.loads(text)["result"]["structuredContent"], response.headers["toolshell-process"]


async def _get(url: str) -> httpx2.Response:
    async with httpx2.AsyncClient(timeout=30) as http:
        return await http.get(url)


async def _ready(served: Served) -> None:
    """Wait (bounded) until `/readyz` says every worker serves."""
    base = served.url.removesuffix("/mcp")
    with anyio.fail_after(60):
        while (await _get(base + "/readyz")).status_code != 200:  # noqa: ASYNC110  (other processes)
            await anyio.sleep(0.2)  # a poll while the workers start, bounded above


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _workers(parent: int) -> set[int]:
    """The live child processes of `parent`."""
    found: set[int] = set()
    for task in Path(f"/proc/{parent}/task").iterdir():
        found |= {int(pid) for pid in (task / "children").read_text().split()}
    return found


@pytest.mark.parametrize("store_url", ENGINES, indirect=True)
async def test_calls_spread_over_the_processes_and_a_kept_shell_is_found_by_each(
    store_url: str, tmp_path: Path
) -> None:
    with serving(tmp_path / "state", "--processes", "2", config=CONFIG, env=_env(store_url)) as served:
        await _ready(served)
        first, _ = await _bash(served.url, "echo 1 > count; X=kept")
        shell, answered = first["shell"], []
        for n in range(2, 42):  # each call on a new connection: the kernel spreads them by their ports
            result, pid = await _bash(served.url, "echo 1 >> count; wc -l < count; echo $X", shell)
            answered.append(pid)
            assert result["shell"] == shell and result["stdout"] == f"{n}\nkept\n", result
            if n >= 6 and len(set(answered)) == 2 and answered[-1] != answered[-2]:
                break  # both processes took calls, the last one after the other
    assert len(set(answered)) == 2, f"every call landed on one process: {answered}"


async def test_sigterm_to_the_parent_drains_every_worker_and_it_exits_0(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with serving(state, "--processes", "2", config=CONFIG, env=_env(str(tmp_path / "s.db"))) as served:
        await _ready(served)
        workers = _workers(served.proc.pid)
        assert len(workers) == 2
        async with anyio.create_task_group() as tg:
            slow: dict[str, Any] = {}

            async def call() -> None:
                slow["result"], slow["pid"] = await _bash(served.url, "touch /tmp/started; sleep 3; echo finished")

            tg.start_soon(call)
            await anyio.sleep(1)  # the call reaches a worker before the signal (no event crosses processes)
            served.proc.send_signal(signal.SIGTERM)
            with anyio.fail_after(10):  # the workers were told: each says it drains
                while (ready := await _get(served.url.removesuffix("/mcp") + "/readyz")).status_code != 503:  # noqa: ASYNC110
                    await anyio.sleep(0.1)  # a poll while the signal reaches them, bounded above
        assert ready.text == "not ready: draining: this worker is shutting down\n"
        assert served.proc.wait(60) == 0
        assert not any("did not finish its drain" in line for line in served.stderr), served.stderr
        answered = slow["result"]  # whole, or at once with its shell (a yield at SIGTERM: docs/tasks.md)
        assert answered["stdout"] == "finished\n" or (answered.get("running") is True and answered.get("shell")), (
            answered
        )
        assert not any(_alive(pid) for pid in workers), "the parent exits after its workers"


async def test_a_worker_that_dies_is_started_again_on_the_same_port(tmp_path: Path) -> None:
    with serving(tmp_path / "state", "--processes", "2", config=CONFIG, env=_env(str(tmp_path / "s.db"))) as served:
        await _ready(served)
        before = _workers(served.proc.pid)
        killed = min(before)
        os.kill(killed, signal.SIGKILL)
        with anyio.fail_after(60):
            while len(_workers(served.proc.pid) - {killed}) < 2:  # noqa: ASYNC110  (another process)
                await anyio.sleep(0.2)  # a poll while the parent restarts it, bounded above
        await _ready(served)
        pids = {(await _bash(served.url, "true"))[1] for _ in range(30)}
    assert str(killed) not in pids
    assert len(pids) == 2, "the restarted worker takes calls on the port"
    assert any("exited with -9; starting it again" in line for line in served.stderr)


def test_readyz_of_a_worker_names_the_worker_that_is_not_serving() -> None:
    status = mmap.mmap(-1, 3)
    slot = WorkerSlot(socket.socket(), 0, 3, status)
    slot.started()
    status[2] = 1
    assert slot.not_ready() == "worker 2 of 3 is not serving (it is starting or restarting)"
    status[1] = 1
    assert slot.not_ready() is None
    slot.socket.close()


def test_a_port_in_use_fails_once_before_any_worker_starts(tmp_path: Path) -> None:
    taken = listening_sockets("127.0.0.1", 0, 1)
    try:
        port = taken[0].getsockname()[1]
        # the trial bind (SO_REUSEADDR only) fails on a port another process listens on
        args = ["serve", "--http", "--no-auth", "--port", str(port), "--processes", "2", "--state-dir", str(tmp_path)]
        result = CliRunner().invoke(main, args)
    finally:
        taken[0].close()
    assert result.exit_code == 1
    assert "Address already in use" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--processes", "2"], "--processes applies to --http only"),
        (["--http", "--no-auth", "--processes", "0"], "'0' is not a count of processes: give 1 to 256, or auto"),
        (["--http", "--no-auth", "--processes", "many"], "'many' is not a count of processes"),
    ],
)
def test_processes_says_what_it_takes(args: list[str], says: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["serve", *args, "--state-dir", str(tmp_path)])
    assert result.exit_code == 2 and says in result.output, result.output


def test_processes_are_refused_a_store_they_cannot_share(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLSHELL_STATE_URL", ":memory:")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    result = CliRunner().invoke(main, ["serve", "--http", "--no-auth", "--processes", "2", "--port", port])
    assert result.exit_code == 2
    assert "a state store the processes share" in result.output, result.output


def test_processes_are_refused_one_process_metrics_port(tmp_path: Path) -> None:
    config = tmp_path / "toolshell.toml"
    config.write_text("[telemetry]\nprometheus_port = 9464\n")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    args = ["serve", "--http", "--no-auth", "--processes", "2", "--port", port, "--config", str(config)]
    result = CliRunner().invoke(main, [*args, "--state-dir", str(tmp_path / "state")])
    assert result.exit_code == 2
    assert "prometheus_port is one process's port" in result.output, result.output


def _environ(pid: int) -> list[bytes]:
    return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")


def _threads(pid: int, name: str) -> int:
    return sum((task / "comm").read_text().strip() == name for task in Path(f"/proc/{pid}/task").iterdir())


async def test_each_worker_runs_bashkit_on_its_share_of_the_cores(tmp_path: Path) -> None:
    """Two workers on this machine's cores: bashkit's runtime (tokio) gets the cores over 2 worker
    threads in each, not one a core in each (`TOKIO_WORKER_THREADS`; an operator's own setting
    wins). Its threads are those workers and one more of the runtime's own."""
    share = max(1, processes.cpu_count() // 2)
    with serving(tmp_path / "state", "--processes", "2", config=CONFIG, env=_env(str(tmp_path / "s.db"))) as served:
        await _ready(served)
        pids: set[int] = set()
        with anyio.fail_after(60):
            while len(pids) < 2:  # each call on a new connection: the kernel spreads them by their ports
                result, pid = await _bash(served.url, "echo ran")
                assert result["stdout"] == "ran\n"
                pids.add(int(pid))
        environ = {pid: _environ(pid) for pid in pids}
        runtime = {pid: _threads(pid, "tokio-rt-worker") for pid in pids}
    assert all(f"TOKIO_WORKER_THREADS={share}".encode() in env for env in environ.values()), environ
    assert all(0 < n <= share + 1 for n in runtime.values()), f"bashkit's runtime threads by worker: {runtime}"
