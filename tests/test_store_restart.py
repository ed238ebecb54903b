# ruff: noqa: F811  (the engine fixtures are imported from _store_support and named as parameters)
"""A PostgreSQL restart mid-script, two workers on one store (issue 22, item 10): the real test
cluster is restarted (and stopped) while a script waits inside a tool call. The script's shell is
kept, the result never says "nothing ran" once it started, the shell call's row ends, and the
reads and idempotent writes after the restart go through the reconnect."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

from _store_support import fresh_database, needs_postgres, pg_ctl, postgres_server  # noqa: F401  (fixtures)
from toolshell.errors import ToolshellError
from toolshell.host import Host
from toolshell.result import RunResult
from toolshell.shell.handles import ShellHandles
from toolshell.shells import Shells
from toolshell.store.postgres import PostgresStore

pytestmark = pytest.mark.anyio
RING = [b"r" * 32]
ALICE = "token:alice"


class Gate:
    """A tool that tells the test it was entered, then waits until the test lets it go."""

    def __init__(self) -> None:
        self.entered = anyio.Event()
        self.release = anyio.Event()

    def server(self) -> MCPServer:
        server = MCPServer("gate", log_level="WARNING")

        async def wait() -> str:
            self.entered.set()
            await self.release.wait()
            return "released"

        server.add_tool(
            wait, name="wait", description="Wait for the test.", annotations=ToolAnnotations(readOnlyHint=True)
        )
        return server


@pytest.fixture
def server(postgres_server: str | None) -> str:
    return needs_postgres(postgres_server)


@asynccontextmanager
async def _workers(url: str, tmp_path: Path, gate: Gate, **store: Any) -> AsyncIterator[tuple[Shells, Shells]]:
    async with AsyncExitStack() as stack:
        made = []
        for name in ("one", "two"):
            opened = PostgresStore(url, **store)
            stack.callback(opened.close)
            host = await stack.enter_async_context(
                Host.open(state_dir=tmp_path / name, store=opened, servers={"gate": gate.server()})
            )
            handles = ShellHandles(opened, idle_seconds=3600, max_per_caller=8, max_bytes=1 << 20)
            shells = Shells(host, handles, RING)
            stack.callback(shells.close)
            made.append(shells)
        yield made[0], made[1]


async def _while_waiting(gate: Gate, run: Callable[[], Any], meanwhile: Callable[[], None]) -> RunResult:
    """`run()` (a script that enters the gate); `meanwhile` done (in a thread) once it waits there."""
    results: list[RunResult] = []

    async def script() -> None:
        results.append(await run())

    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            tg.start_soon(script)
            await gate.entered.wait()
            await anyio.to_thread.run_sync(meanwhile)
            gate.release.set()
    return results[0]


def _shell_call(store: PostgresStore, script_start: str) -> dict[str, Any]:
    rows = store.query(
        "SELECT exit_code, script_preview FROM shell_calls WHERE script_preview LIKE ?", (f"{script_start}%",)
    )
    assert len(rows) == 1
    return rows[0]


async def test_a_restart_while_a_script_waits_in_a_tool_call_keeps_its_shell_and_ends_its_row(
    server: str, tmp_path: Path
) -> None:
    url, gate = fresh_database(server), Gate()
    async with _workers(url, tmp_path, gate) as (one, two):
        handle = (await one.run(ALICE, None, "echo before > f")).shell
        ran = await _while_waiting(
            gate,
            lambda: one.run(ALICE, handle, "echo started >> f; tools gate wait; echo after >> f"),
            lambda: pg_ctl(server, "restart"),
        )
        after = await two.run(ALICE, handle, "cat f")
        row = _shell_call(one.handles.store, "echo started")  # type: ignore[arg-type]
    assert (ran.exit_code, ran.stdout, ran.shell, ran.shell_note) == (0, "released\n", handle, None)
    assert (after.stdout, after.shell) == ("before\nstarted\nafter\n", handle)
    assert row["exit_code"] == 0, "the shell call's row ended"


async def test_a_store_down_past_the_retries_keeps_the_shell_and_says_nothing_ran_only_before_the_script_started(
    server: str, tmp_path: Path
) -> None:
    url, gate = fresh_database(server), Gate()
    try:
        async with _workers(url, tmp_path, gate, timeout=2.0, retry_seconds=2.0) as (one, two):
            handle = (await one.run(ALICE, None, "echo before > f")).shell
            ran = await _while_waiting(
                gate,
                lambda: one.run(ALICE, handle, "echo started >> f; tools gate wait; echo after >> f"),
                lambda: pg_ctl(server, "stop"),
            )
            down = await two.run(ALICE, handle, "echo never >> f")  # before it starts: nothing runs, the shell stays
            pg_ctl(server, "start")
            again = await two.run(ALICE, handle, "cat f")
            await one.run(ALICE, handle, "true")  # one's next commit takes the rows it could not write
            row = _shell_call(one.handles.store, "echo started")  # type: ignore[arg-type]
    finally:
        if not _up(server):  # a failed assertion above must not leave the run's cluster down
            pg_ctl(server, "start")
    # The script ran to its end; its commit (state and timeline rows together) could not be written.
    note = ran.shell_note or ""
    assert (ran.exit_code, ran.stdout, ran.shell) == (0, "released\n", handle)
    assert "nothing ran" not in note and "could not be saved" in note and "cannot reach" in note
    assert (again.exit_code, again.stdout, again.shell) == (0, "before\n", handle), "the state saved before"
    assert row["exit_code"] == 0, "the rows held while the store was down are written with the next commit"
    refused = json.loads(down.stderr)["error"]
    assert (down.exit_code, down.shell, refused["retryable"]) == (1, handle, True)
    assert f"nothing ran; the shell {handle} is kept: call again with it" in refused["message"]


async def test_a_run_whose_last_write_is_cut_past_the_retries_still_ends_its_row(server: str, tmp_path: Path) -> None:
    """The connection of the write that ends the shell call's row (the call's commit, with its
    shell's state) is cut (as by a restart), once, with no retries left: the state is not kept and
    the result says so, and its row is ended, not left `running` for good."""
    url, gate = fresh_database(server), Gate()
    gate.release.set()
    async with _workers(url, tmp_path, gate, retry_seconds=0.0) as (one, _two):
        handle = (await one.run(ALICE, None, "echo before > f")).shell
        store = one.handles.store
        store.execute("CREATE SEQUENCE cuts")
        store.execute(
            "CREATE FUNCTION cut_once() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "IF NEW.exit_code IS NOT NULL AND nextval('cuts') = 1 THEN PERFORM pg_terminate_backend(pg_backend_pid()); "
            "END IF; RETURN NEW; END $$"
        )
        store.execute("CREATE TRIGGER cut BEFORE INSERT ON shell_calls FOR EACH ROW EXECUTE FUNCTION cut_once()")
        ran = await one.run(ALICE, handle, "echo cut-run >> f; tools gate wait")
        row = _shell_call(store, "echo cut-run")  # type: ignore[arg-type]
        after = await one.run(ALICE, handle, "cat f")
    assert (ran.exit_code, ran.shell) == (0, handle) and "could not be saved" in (ran.shell_note or "")
    assert row["exit_code"] == 0, "the run's row ended, with its exit code"
    assert after.stdout == "before\n", "the state saved before the call"


def _up(server: str) -> bool:
    # lazy: psycopg is needed only where PostgreSQL runs
    import psycopg

    try:
        psycopg.connect(server, connect_timeout=5).close()
    except psycopg.OperationalError:
        return False
    return True


def _kill_others(server: str, url: str) -> int:
    """Cut every connection to the database of `url` but this one, waiting until each is gone: as a
    restart leaves a pool (the server is back only after its old backends ended)."""
    # lazy: psycopg is needed only where PostgreSQL runs
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    name = conninfo_to_dict(url)["dbname"]
    with psycopg.connect(server, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity"
            " WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        ).fetchall()
    return len(rows)


def test_a_pool_whose_connections_were_cut_hands_out_only_live_ones_so_any_write_goes_through(server: str) -> None:
    store = PostgresStore(fresh_database(server), min_size=2)
    try:
        store.execute("CREATE TABLE ledger (entry TEXT)")
        assert _kill_others(server, store.url) >= 1
        store.execute("INSERT INTO ledger (entry) VALUES (?)", ("paid",))  # not idempotent: never run twice
        assert [r["entry"] for r in store.query("SELECT entry FROM ledger")] == ["paid"]
    finally:
        store.close()


def test_a_read_whose_connection_is_cut_mid_statement_is_run_again_and_a_plain_write_is_not(server: str) -> None:
    store = PostgresStore(fresh_database(server))
    try:
        store.execute("CREATE SEQUENCE tries")
        store.execute("CREATE TABLE ledger (entry TEXT)")
        # The first run of each statement cuts its own connection (the sequence counts runs, outside
        # any transaction); a second run answers.
        cut = "CASE WHEN nextval('tries') % 2 = 1 THEN pg_terminate_backend(pg_backend_pid()) ELSE true END"
        assert store.query(f"SELECT {cut} AS ok")[0]["ok"] is True
        with pytest.raises(ToolshellError) as lost:
            store.execute(f"INSERT INTO ledger (entry) SELECT 'paid' WHERE {cut}")
        runs = store.query("SELECT last_value FROM tries")[0]["last_value"]
        entries = store.query("SELECT count(*) AS n FROM ledger")[0]["n"]
    finally:
        store.close()
    assert lost.value.retryable and "cannot reach the PostgreSQL state store" in lost.value.message
    assert (runs, entries) == (3, 0), "the read ran twice, the write once (and did not commit)"
