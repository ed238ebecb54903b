"""Both store engines for the shared store test-suite: SQLite in a temp dir, and a real PostgreSQL.

The PostgreSQL server is the one `scripts/postgres.sh start` ran for the test run
(`TOOLSHELL_TEST_POSTGRES_URL`, set by `scripts/test.sh`); without it, this module starts one the
same way for the session (Debian's server as the `postgres` user on a Unix socket, no TCP port).
Each test gets a database of its own. Where no server can run, PostgreSQL cases are skipped with
the reason, except under CI, where they fail (`_ci_support.skip_or_fail`).
"""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _ci_support import in_ci, skip_or_fail

ROOT = Path(__file__).resolve().parent.parent
ENGINES = ["sqlite", "postgresql"]


def _server_url() -> Iterator[str | None]:
    url = os.environ.get("TOOLSHELL_TEST_POSTGRES_URL")
    if url:
        yield url
        return
    started = subprocess.run(
        ["bash", str(ROOT / "scripts" / "postgres.sh"), "start"], capture_output=True, text=True, check=False
    )
    if started.returncode != 0:
        if in_ci():
            pytest.fail(f"PostgreSQL could not start for the store tests: {started.stderr.strip()}")
        yield None
        return
    env = dict(line.removeprefix("export ").split("=", 1) for line in started.stdout.splitlines())
    try:
        yield env["TOOLSHELL_TEST_POSTGRES_URL"].strip("'")
    finally:
        subprocess.run(
            ["bash", str(ROOT / "scripts" / "postgres.sh"), "stop", env["TOOLSHELL_TEST_POSTGRES_DIR"].strip("'")],
            check=False,
        )


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str | None]:
    """The URL of the run's PostgreSQL server (its `postgres` database), or None where none can run."""
    yield from _server_url()


def needs_postgres(server: str | None) -> str:
    """The run's server; where none can run, a skip with the install step (a failure under CI)."""
    if server is None:
        skip_or_fail("PostgreSQL is not installed here: scripts/postgres.sh installs and starts it")
    return server


def fresh_database(server: str) -> str:
    """A new empty database on the server; its URL."""
    # lazy: psycopg is needed only where PostgreSQL runs
    import psycopg

    name = "t_" + secrets.token_hex(6)
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    base, _, query = server.partition("?")
    return f"{base.rsplit('/', 1)[0]}/{name}" + (f"?{query}" if query else "")


@pytest.fixture
def store_url(request: Any, postgres_server: str | None, tmp_path: Path) -> str:
    """A new empty store of each engine: a SQLite path, or a PostgreSQL URL."""
    if request.param == "sqlite":
        return str(tmp_path / "store" / "state.db")
    return fresh_database(needs_postgres(postgres_server))


def pg_ctl(server: str, action: str) -> None:
    """`pg_ctl stop`, `start` or `restart` on the run's test cluster (the one `server` is on), as
    `scripts/postgres.sh` runs it: as the `postgres` user when root; `restart` and `start` keep the
    options it was started with (`postmaster.opts`)."""
    # lazy: conninfo parsing is psycopg's, needed only where PostgreSQL runs
    from psycopg.conninfo import conninfo_to_dict

    directory = str(conninfo_to_dict(server)["host"])
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), key=lambda p: int(p.parts[-3]))
    binary = str(found[-1]) if found else "pg_ctl"
    run_as = ["runuser", "-u", "postgres", "--"] if os.getuid() == 0 else []
    data = f"{directory}/data"
    if action == "start":  # `start` reads no postmaster.opts: give the socket dir and options again
        extra = ["-o", f"-k {directory} -c listen_addresses='' -c fsync=off -c max_connections=200"]
        command = [binary, "-D", data, "-l", f"{directory}/server.log", "-w", *extra, "start"]
    else:
        command = [binary, "-D", data, "-l", f"{directory}/server.log", "-m", "fast", "-w", action]
    # No pipes: the server pg_ctl starts would hold them open, and this would wait for it to exit.
    subprocess.run([*run_as, *command], check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, timeout=120)
