"""Both store engines for the shared store test-suite: SQLite in a temp dir, and a real PostgreSQL.

The PostgreSQL server is the one `scripts/postgres.sh start` ran for the test run
(`TOOLSHELL_TEST_POSTGRES_URL`, set by `scripts/test.sh`); without it, this module starts one the
same way for the session (Debian's server as the `postgres` user on a Unix socket, no TCP port).
Each test gets a database of its own. Where no server can run, PostgreSQL cases are skipped with
the reason, except under CI, where they fail.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

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
        if os.environ.get("CI"):
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
    if postgres_server is None:
        pytest.skip("PostgreSQL is not installed here: scripts/postgres.sh installs and starts it")
    return fresh_database(postgres_server)
