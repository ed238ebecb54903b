"""PostgreSQL tasks of the MCPMark kind: a PostgreSQL MCP server called directly and through toolshell's `bash`.

    python benchmarks/pgtasks.py [--postgres-url URL] [--rounds N] [--only NAME ...] [--out FILE] [--transcript]

Ten multi-step tasks (sqltasks/catalog.py: reports across tables, schema changes, data fixes) against
the real `@henkey/postgres-mcp-server` from tests/node, on a real PostgreSQL (`--postgres-url`, default
`$TOOLSHELL_TEST_POSTGRES_URL`, else one started with scripts/postgres.sh for the run). Each task, each
way and each round gets a new database built from the benchmark's own rows (sqltasks/world.py, about
12,000, the same every run) and a freshly started server: the direct way an SDK client of the server,
the toolshell way a `toolshell serve` (stdio, a new state directory) with that server behind it. A
verifier then queries the database. Tokens are o200k_base, counted as `tokens.py` counts them (its
`Conversation`), of the text a host hands the model (`render`). Per task: success, turns, result
tokens, cumulative input, and the tool time p50/p95 over the rounds. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio
from mcp import MCPError, StdioServerParameters
from mcp.client import Client
from mcp.client.stdio import stdio_client
from sqltasks import world
from sqltasks.catalog import TASKS
from sqltasks.task import PgTask
from tokens import NODE_BIN, SYSTEM, Conversation, direct_definitions, render, rounds_summary, tokens

HERE = Path(__file__).resolve().parent
SERVER = NODE_BIN / "postgres-mcp"
PACKAGE = NODE_BIN.parent / "@henkey" / "postgres-mcp-server" / "package.json"
TOOLSHELL = shutil.which("toolshell") or str(Path(sys.executable).parent / "toolshell")
DISCOVERY = "tools postgres --help"
SIGNED = "pg-execute-sql sql="
"""In the `bash` description when it lists each tool with its arguments (then discovery takes no turn)."""
TARGET_RATIO = 15
SERVE_CONFIG = """[approval]
mode = "off"

[[mcp.servers]]
name = "postgres"
command = {command}
env = {{ POSTGRES_CONNECTION_STRING = {url} }}
"""


@dataclass
class Run:
    """One task done one way once: its conversation, answer, what the verifier found, its times.

    `seconds` is the task's tool calls, from the first call to the last result; `started` is the
    server's start (spawn to initialized), `listed` its first `tools/list`, `each` every call's time."""

    talk: Conversation
    answer: str
    problems: list[str]
    seconds: float
    discovery: int = 0
    started: float = 0.0
    listed: float = 0.0
    each: list[float] = field(default_factory=list)


@asynccontextmanager
async def _fresh(params: StdioServerParameters) -> AsyncIterator[tuple[Client, list[Any], float, float]]:
    """A client of a freshly spawned server: it, the tools it listed first, and the start and list times."""
    with open(os.devnull, "w") as errlog:  # noqa: ASYNC230 - /dev/null never blocks; drops the start-up banners
        began = time.perf_counter()
        async with Client(stdio_client(params, errlog=errlog)) as client:
            started = time.perf_counter()
            tools = (await client.list_tools()).tools
            yield client, tools, started - began, time.perf_counter() - started


def _definitions(tools: list[Any], server: str) -> int:
    """The tokens of `tools` as an agent host sends them: `mcp__<server>__<tool>`, description, schema."""
    return tokens(json.dumps(direct_definitions({server: tools}), ensure_ascii=False))


def _prompt(task: PgTask) -> int:
    return tokens(SYSTEM) + tokens(task.prompt)


@contextmanager
def database(server: str, task: PgTask) -> Iterator[tuple[str, world.Shop]]:
    """A new database holding the task's rows, dropped afterwards: its URL and the rows."""
    name = f"pgtasks_{task.name.replace('-', '_')}_{secrets.token_hex(4)}"
    shop = task.shop()
    url = world.create(server, name, shop)
    try:
        yield url, shop
    finally:
        world.drop(server, name)


async def direct_run(task: PgTask, server: str) -> tuple[int, Run]:
    """The task the direct way, one call per turn, on a fresh database and a freshly started server."""
    with database(server, task) as (url, shop):
        params = StdioServerParameters(command=str(SERVER), env={"POSTGRES_CONNECTION_STRING": url})
        async with _fresh(params) as (client, listed, started, listed_s):
            definitions = _definitions(listed, "postgres")
            talk = Conversation(_prompt(task), definitions)

            each: list[float] = []

            async def call(tool: str, arguments: dict[str, Any]) -> str:
                began = time.perf_counter()
                try:
                    text = render(await client.call_tool(tool, arguments))
                except MCPError as e:  # what the host sends back when the server refuses the call
                    text = f"Error: {e}"
                each.append(time.perf_counter() - began)
                talk.add({"name": f"mcp__postgres__{tool}", "input": arguments}, text)
                return text

            start = time.perf_counter()
            answer = await task.direct(call)
            seconds = time.perf_counter() - start
        problems = task.check(url, shop, answer)
    return definitions, Run(talk, answer, problems, seconds, 0, started, listed_s, each)


async def toolshell_run(task: PgTask, server: str, scratch: Path) -> tuple[int, Run]:
    """The task through `bash` of a freshly started `toolshell serve` (stdio, a new state directory),
    driven by the SDK's client: its first `tools/list` is the definition the model gets; one
    `tools postgres --help` turn comes first unless that definition already lists the tools with
    their arguments. The text counted is the result's content; the answer and the exit status are
    read from its structured content."""
    with database(server, task) as (url, shop):
        config = scratch / "serve.toml"
        config.write_text(SERVE_CONFIG.format(command=json.dumps(str(SERVER)), url=json.dumps(url)))
        state = scratch / "state"
        shutil.rmtree(state, ignore_errors=True)
        args = ["serve", "--config", str(config), "--state-dir", str(state)]
        params = StdioServerParameters(command=TOOLSHELL, args=args, env=dict(os.environ))
        async with _fresh(params) as (client, listed, started, listed_s):
            definitions = _definitions(listed, "toolshell")
            description = next(t.description or "" for t in listed if t.name == "bash")
            scripts = () if SIGNED in description else (DISCOVERY,)
            talk = Conversation(_prompt(task), definitions)
            body: dict[str, Any] = {}
            start = time.perf_counter()
            each = []
            for script in (*scripts, *task.scripts()):
                began = time.perf_counter()
                result = await (
                    _discover(client) if script == DISCOVERY else client.call_tool("bash", {"script": script})
                )
                each.append(time.perf_counter() - began)
                body = dict(result.structured_content or {})
                talk.add({"name": "mcp__toolshell__bash", "input": {"script": script}}, render(result))
                if not body.get("success", body.get("exit_code") == 0):
                    break
            seconds = time.perf_counter() - start
        lines = str(body.get("stdout", "")).strip().splitlines()
        answer = lines[-1] if lines else ""
        problems = task.check(url, shop, answer)
        if not body.get("success", body.get("exit_code") == 0):
            problems.insert(0, f"the script failed: {json.dumps(body)[:300]}")
    return definitions, Run(talk, answer, problems, seconds, len(scripts), started, listed_s, each)


async def _discover(client: Client) -> Any:
    """`tools postgres --help` as the model reads it: once the server has connected. A scripted
    agent asks the instant the client has listed, where a model takes seconds to write its first
    turn; a build that answers before the server connects says `0 tools (connecting)`, and the call
    is made again (the wait counted in the task's time) until it lists, for 30 s at most."""
    deadline = time.perf_counter() + 30
    while True:
        result = await client.call_tool("bash", {"script": DISCOVERY})
        if "(connecting)" not in render(result) or time.perf_counter() > deadline:
            return result
        await anyio.sleep(0.05)


def side(runs: list[Run]) -> dict[str, Any]:
    """One way of one task over the rounds: the first round's tokens (checked equal in the others)."""
    return rounds_summary(runs) | {
        "start_ms_p50": 1000 * statistics.median(r.started for r in runs),
        "call_ms_first_round": [round(1000 * s, 1) for s in runs[0].each],
    }


async def measure(
    server: str, tasks: list[PgTask], rounds: int, scratch: Path
) -> tuple[dict[str, Any], dict[str, list[Run]]]:
    """`rounds` rounds of every task both ways, the ways alternating which goes first: the JSON-ready
    result per task and way, and each way's runs of the first round (their transcripts)."""
    runs: dict[str, list[list[Run]]] = {"direct": [[] for _ in tasks], "toolshell": [[] for _ in tasks]}
    definitions: dict[str, int] = {}
    for n in range(rounds):
        for i, task in enumerate(tasks):
            for way in ("direct", "toolshell") if (n + i) % 2 == 0 else ("toolshell", "direct"):
                if way == "direct":
                    definitions[way], done = await direct_run(task, server)
                else:
                    definitions[way], done = await toolshell_run(task, server, scratch)
                runs[way][i].append(done)
    rows = [
        {"task": t.name, "kind": t.kind} | {way: side(runs[way][i]) for way in ("direct", "toolshell")}
        for i, t in enumerate(tasks)
    ]
    result = {"definitions": definitions, "tasks": rows, "rounds": rounds, "totals": totals(rows)}
    return result, {way: [r[0] for r in done] for way, done in runs.items()}


def totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """toolshell against direct over the set, and the targets."""
    d = [r["direct"] for r in rows]
    s = [r["toolshell"] for r in rows]
    cumulative = (sum(x["cumulative"] for x in d), sum(x["cumulative"] for x in s))
    wall = (statistics.median(x["wall_ms"]["p50"] for x in d), statistics.median(x["wall_ms"]["p50"] for x in s))
    slower = [r["task"] for r in rows if r["toolshell"]["wall_ms"]["p50"] > r["direct"]["wall_ms"]["p50"]]
    return {
        "success": {
            "direct": f"{sum(x['success'] for x in d)}/{len(d)}",
            "toolshell": f"{sum(x['success'] for x in s)}/{len(s)}",
        },
        "turns": {"direct": sum(x["turns"] for x in d), "toolshell": sum(x["turns"] for x in s)},
        "result_tokens": {
            "direct": sum(x["result_tokens"] for x in d),
            "toolshell": sum(x["result_tokens"] for x in s),
        },
        "cumulative": {"direct": cumulative[0], "toolshell": cumulative[1], "ratio": cumulative[0] / cumulative[1]},
        "wall_ms_p50_median_over_tasks": {"direct": wall[0], "toolshell": wall[1]},
        "targets": {
            "every_verifier_passes_both_ways": all(x["success"] for x in d + s),
            f"cumulative_{TARGET_RATIO}x_below_over_the_set": cumulative[0] / cumulative[1] >= TARGET_RATIO,
            "p50_wall_no_worse_than_direct_on_every_task": not slower,
            "tasks_slower": slower,
        },
    }


def transcripts(tasks: list[PgTask], first: dict[str, list[Run]], width: int = 600) -> str:
    """Each task's turns, each way, results cut at `width` characters."""
    lines = []
    for i, task in enumerate(tasks):
        for way, done in first.items():
            lines.append(f"--- {task.name} ({way})")
            for call, output in done[i].talk.transcript:
                lines += [f">>> {call}", output if len(output) <= width else output[:width] + " [...]"]
    return "\n".join(lines)


def table(result: dict[str, Any]) -> str:
    head = f"{'task':<18}" + "".join(f"{'| ' + w:<38}" for w in ("direct", "toolshell"))
    sub = f"{'':<18}" + f"{'| ok turns results  cumul p50/p95 ms':<38}" * 2
    lines = [f"PostgreSQL tasks, {result['rounds']} rounds, o200k_base", head, sub]
    for row in result["tasks"]:
        cells = []
        for w in ("direct", "toolshell"):
            s = row[w]
            wall = f"{s['wall_ms']['p50']:.0f}/{s['wall_ms']['p95']:.0f}"
            ok = "yes" if s["success"] else "NO"
            cells.append(f"| {ok:<3}{s['turns']:>4}{s['result_tokens']:>8}{s['cumulative']:>8} {wall:>11} ")
        lines.append(f"{row['task']:<18}" + "".join(cells))
    t = result["totals"]
    c, r, turns, wall = t["cumulative"], t["result_tokens"], t["turns"], t["wall_ms_p50_median_over_tasks"]
    lines += [
        "",
        f"success {t['success']['direct']} / {t['success']['toolshell']};"
        f" turns {turns['direct']} / {turns['toolshell']};"
        f" result tokens {r['direct']:,} / {r['toolshell']:,}; cumulative {c['direct']:,} / {c['toolshell']:,}"
        f" = {c['ratio']:.1f}x fewer; p50 wall (median over tasks) {wall['direct']:.0f} / {wall['toolshell']:.0f} ms",
        f"definitions {result['definitions']['direct']:,} / {result['definitions']['toolshell']:,} tokens",
        f"targets: {json.dumps(t['targets'])}",
    ]
    return "\n".join(lines)


@contextmanager
def postgres(url: str | None) -> Iterator[str]:
    """`url`, or a PostgreSQL started for the run with scripts/postgres.sh (stopped afterwards)."""
    if url:
        yield url
        return
    script = HERE.parent / "scripts" / "postgres.sh"
    started = subprocess.run(["bash", str(script), "start"], capture_output=True, text=True, check=False)
    if started.returncode:
        sys.exit(f"no --postgres-url and none could start (scripts/postgres.sh: {started.stderr.strip()})")
    env = dict(line.removeprefix("export ").split("=", 1) for line in started.stdout.splitlines())
    try:
        yield env["TOOLSHELL_TEST_POSTGRES_URL"].strip("'")
    finally:
        subprocess.run(["bash", str(script), "stop", env["TOOLSHELL_TEST_POSTGRES_DIR"].strip("'")], check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("TOOLSHELL_TEST_POSTGRES_URL"),
        help="a server whose user may create databases (default $TOOLSHELL_TEST_POSTGRES_URL; else one is started)",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=[], help="task names (default: all)")
    parser.add_argument("--out", type=Path, default=HERE / "pgtasks_results.json")
    parser.add_argument("--transcript", action="store_true", help="also print every call and result of round 1")
    args = parser.parse_args()
    unknown = sorted(set(args.only) - {t.name for t in TASKS})
    if unknown:
        parser.error(f"no task {', '.join(unknown)}; the tasks: {', '.join(t.name for t in TASKS)}")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if not SERVER.exists():
        sys.exit(f"{SERVER} is missing: run `npm install --prefix tests/node`")
    tasks = [t for t in TASKS if not args.only or t.name in args.only]
    with postgres(args.postgres_url) as server, tempfile.TemporaryDirectory(prefix="toolshell-pgtasks-") as tmp:
        result, first = anyio.run(measure, server, tasks, args.rounds, Path(tmp))
    if args.transcript:
        print(transcripts(tasks, first))
    result |= {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cores": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "versions": {p: version(p) for p in ("mcp", "bashkit", "bpe-openai", "psycopg")},
        "server": "@henkey/postgres-mcp-server " + json.loads(PACKAGE.read_text())["version"],
        "tokenizer": "o200k_base (bpe-openai, vocabulary bundled in the wheel)",
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(table(result))
    failed = [f"{r['task']} ({w})" for r in result["tasks"] for w in ("direct", "toolshell") if not r[w]["success"]]
    sys.exit(f"not done exactly: {', '.join(failed)}" if failed else 0)


if __name__ == "__main__":
    main()
