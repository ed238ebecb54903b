# ruff: noqa: F811  (the server fixture is imported from _store_support and named as a parameter)
"""benchmarks/pgtasks.py: tasks run both ways on the real PostgreSQL MCP server and PostgreSQL, and
verifiers that catch a wrong result."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from _ci_support import requires
from _store_support import needs_postgres, postgres_server  # noqa: F401  (fixture)

pytest.importorskip("bpe_openai", reason="pip install bpe-openai (the benchmark's offline o200k tokenizer)")
pytest.importorskip("psycopg", reason="pip install -e '.[dev]' (psycopg builds and checks the databases)")
sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
import pgtasks  # noqa: E402 - benchmarks/ is a folder of scripts, put on the path just above
from sqltasks import catalog, world  # noqa: E402
from sqltasks.catalog import TASKS  # noqa: E402
from sqltasks.task import Caller  # noqa: E402

needs_server = requires(
    pgtasks.SERVER.exists() and shutil.which("node"),
    reason="run `npm install --prefix tests/node` (@henkey/postgres-mcp-server)",
)
BY_NAME = {t.name: t for t in TASKS}


def test_every_task_has_its_two_scripts_and_the_rows_are_the_same_every_time() -> None:
    assert len(TASKS) == 10
    for task in TASKS:
        look, work = task.scripts()
        assert "tools postgres " in look and "tools postgres " in work, task.name
    assert world.data() == world.data()
    assert {k: len(v) for k, v in world.data().tables.items()} == {
        "customers": 300,
        "products": 96,
        "orders": 2400,
        "order_items": 5975,
        "payments": 2139,
    }


def test_every_verifier_fails_on_the_database_the_task_starts_from(postgres_server: str | None) -> None:
    server = needs_postgres(postgres_server)
    for task in TASKS:
        # Nothing done yet: every verifier must see that, or it would pass an agent that did nothing.
        with pgtasks.database(server, task) as (url, shop):
            assert task.check(url, shop, ""), task.name


async def _monthly_with_cancelled(call: Caller) -> str:
    """The report with the cancelled orders counted too: a plausible slip the verifier must name."""
    await catalog.look(call, "orders", "order_items")
    await catalog.execute(call, catalog.MONTHLY.replace("WHERE o.status <> 'cancelled' ", ""))
    return ""


async def _payments_answer_unsorted(call: Caller) -> str:
    """The fix done right, the answer's ids in the wrong order."""
    answer = await catalog._payment_mismatch(call)
    return ",".join(sorted(answer.split(","), reverse=True))


@pytest.mark.real
@pytest.mark.anyio
@needs_server
async def test_two_tasks_are_done_both_ways_and_a_wrong_report_and_a_wrong_answer_are_caught(
    postgres_server: str | None, tmp_path: Path
) -> None:
    server = needs_postgres(postgres_server)
    chosen = [
        BY_NAME["dedupe-customers"],
        BY_NAME["payment-mismatch"],
        dataclasses.replace(BY_NAME["monthly-revenue"], direct=_monthly_with_cancelled),
        dataclasses.replace(BY_NAME["payment-mismatch"], direct=_payments_answer_unsorted),
    ]
    result, first = await pgtasks.measure(server, chosen, 1, tmp_path)
    dedupe, payments, report, answer = result["tasks"]
    assert (dedupe["direct"]["success"], dedupe["toolshell"]["success"]) == (True, True), dedupe
    assert (payments["direct"]["success"], payments["toolshell"]["success"]) == (True, True), payments
    assert payments["direct"]["answer"] == payments["toolshell"]["answer"]
    assert len(payments["direct"]["answer"].split(",")) == 9
    assert report["direct"]["success"] is False
    assert report["direct"]["problems"][0].startswith("monthly_revenue: 6 rows, expected 6; row 1 is ('2026-01'")
    assert answer["direct"]["problems"] == [
        f"answer {answer['direct']['answer']!r} is not {payments['direct']['answer']!r}"
    ]
    # Direct: two schemas, the duplicates, the fix, its check, then the answer; toolshell: the help
    # turn (the `bash` description does not list 18 tools' arguments), the look, the work, the answer.
    assert dedupe["direct"]["turns"] == 6
    assert dedupe["toolshell"]["turns"] == 3 + dedupe["toolshell"]["discovery_turns"]
    totals = pgtasks.totals(result["tasks"][:2])
    assert totals["success"] == {"direct": "2/2", "toolshell": "2/2"}
    assert totals["cumulative"]["direct"] == dedupe["direct"]["cumulative"] + payments["direct"]["cumulative"]
    # The transcript is what was counted: the work script wrote its SQL with key=@file.
    scripts = [json.loads(call)["input"]["script"] for call, _ in first["toolshell"][0].talk.transcript]
    assert scripts[-1] == BY_NAME["dedupe-customers"].scripts()[1]
    assert "sql=@work.sql" in scripts[-1]


@pytest.mark.real
@needs_server
def test_the_documented_command_prints_the_table_and_writes_the_results(
    postgres_server: str | None, tmp_path: Path
) -> None:
    server = needs_postgres(postgres_server)
    out = tmp_path / "results.json"
    command = [sys.executable, pgtasks.__file__, "--rounds", "1", "--only", "status-enum", "restock"]
    done = subprocess.run(
        [*command, "--postgres-url", server, "--out", str(out)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "restock" in done.stdout and "targets:" in done.stdout
    written = json.loads(out.read_text())
    assert [t["task"] for t in written["tasks"]] == ["status-enum", "restock"]
    assert written["tasks"][1]["toolshell"]["answer"] == written["tasks"][1]["direct"]["answer"]
    assert written["server"].startswith("@henkey/postgres-mcp-server ")
