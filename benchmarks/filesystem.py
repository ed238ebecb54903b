"""Filesystem tasks, solved by calling server-filesystem's tools directly and through toolshell's `bash`.

    python benchmarks/filesystem.py [--rounds N] [--before REV | --no-before] [--only NAME ...] [--out FILE]

Ten tasks (fstasks/catalog.py) against the real `@modelcontextprotocol/server-filesystem` from
tests/node, each way from a fresh copy of the same folder, each result checked byte for byte.
Tokens are o200k_base, counted as `tokens.py` counts them (its `Conversation`). Per task: success,
turns, discovery turns, result tokens, cumulative input, and wall time p50/p95 over the rounds.
The toolshell way also runs on the `src/` of an earlier commit (`--before`, `git archive`), in a
child process, so the build before a change is measured in the same run. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio
from fstasks import world
from fstasks.catalog import TASKS
from fstasks.task import FsTask
from mcp import MCPError, StdioServerParameters
from mcp.client import Client
from mcp.client.stdio import stdio_client
from tokens import NODE_BIN, SYSTEM, Conversation, direct_definitions, render, rounds_summary, tokens

import toolshell

HERE = Path(__file__).resolve().parent
DISCOVERY = "tools filesystem --help"
SIGNED = "read-text-file path="
"""In the `bash` description when it lists each tool with its arguments (then discovery takes no turn)."""
TARGET_RATIO = 10
BEFORE = "c9f34a5"
"""The build before issue 32's round 3: the JSON envelope as the text, the first `tools/list`
answered while the server still started, the longer description."""


def entries(files: Path) -> dict[str, dict[str, Any]]:
    return {"filesystem": {"command": str(NODE_BIN / "mcp-server-filesystem"), "args": [str(files)]}}


TOOLSHELL = shutil.which("toolshell") or str(Path(sys.executable).parent / "toolshell")
SERVE_CONFIG = """[approval]
mode = "off"

[[mcp.servers]]
name = "filesystem"
command = {command}
args = [{files}]
"""


@dataclass
class Run:
    """One task done one way once: its conversation, answer, what the verifier found, its times.

    `seconds` is the task's tool calls, from the first call to the last result; `started` is from
    spawning the server (`toolshell serve`, or the filesystem server) to `initialize` answered, and
    `listed` from there to the first `tools/list` answered (toolshell waits there for the server)."""

    talk: Conversation
    answer: str
    problems: list[str]
    seconds: float
    discovery: int = 0
    started: float = 0.0
    listed: float = 0.0
    as_json: Conversation | None = None
    """toolshell: the same turns had each result been the JSON envelope (the shape before)."""


def _prompt(task: FsTask, files: Path) -> int:
    return tokens(SYSTEM) + tokens(f"{task.prompt} The files are under {files}.")


def _definitions(tools: list[Any], server: str) -> int:
    """The tokens of `tools` as an agent host sends them: `mcp__<server>__<tool>`, description, schema."""
    return tokens(json.dumps(direct_definitions({server: tools}), ensure_ascii=False))


@asynccontextmanager
async def _fresh(params: StdioServerParameters) -> AsyncIterator[tuple[Client, list[Any], float, float]]:
    """A client of a freshly spawned server: it, the tools it listed first, and the start and list times."""
    with open(os.devnull, "w") as errlog:  # noqa: ASYNC230 - /dev/null never blocks; drops the start-up banners
        began = time.perf_counter()
        async with Client(stdio_client(params, errlog=errlog)) as client:
            started = time.perf_counter()
            tools = (await client.list_tools()).tools
            yield client, tools, started - began, time.perf_counter() - started


async def direct_round(tasks: list[FsTask], root: Path) -> tuple[int, list[Run]]:
    """Every task the direct way, one call per turn, each on a freshly started server; the
    definitions' tokens and the runs."""
    files = world.build(root)
    entry = entries(files)["filesystem"]
    runs, definitions = [], 0
    for task in tasks:
        params = StdioServerParameters(command=entry["command"], args=entry["args"])
        async with _fresh(params) as (client, listed, started, listed_s):
            definitions = _definitions(listed, "filesystem")
            talk = Conversation(_prompt(task, files), definitions)

            async def call(tool: str, arguments: dict[str, Any], talk: Conversation = talk, c: Client = client) -> str:
                try:
                    text = render(await c.call_tool(tool, arguments))
                except MCPError as e:
                    text = f"Error: {e}"
                talk.add({"name": f"mcp__filesystem__{tool}", "input": arguments}, text)
                return text

            start = time.perf_counter()
            answer = await task.direct(call, files)
            seconds = time.perf_counter() - start
        runs.append(Run(talk, answer, task.verify(files, answer), seconds, started=started, listed=listed_s))
    return definitions, runs


async def toolshell_round(tasks: list[FsTask], root: Path) -> tuple[int, list[Run]]:
    """Every task through `bash` of a freshly started `toolshell serve` (stdio, a new state directory
    per task, as a CI job or a new container starts it), driven by the SDK's client: its first
    `tools/list` is the definition the model gets; one `tools filesystem --help` turn comes first
    unless that definition already lists the tools with their arguments."""
    files = world.build(root)
    entry = entries(files)["filesystem"]
    config = root.parent / f"{root.name}-serve.toml"
    config.write_text(SERVE_CONFIG.format(command=json.dumps(entry["command"]), files=json.dumps(entry["args"][0])))
    runs, definitions = [], 0
    for n, task in enumerate(tasks):
        state = root.parent / f"{root.name}-state-{n}"
        shutil.rmtree(state, ignore_errors=True)
        args = ["serve", "--config", str(config), "--state-dir", str(state)]
        params = StdioServerParameters(command=TOOLSHELL, args=args, env=dict(os.environ))
        async with _fresh(params) as (client, listed, started, listed_s):
            definitions = _definitions(listed, "toolshell")
            description = next(t.description or "" for t in listed if t.name == "bash")
            scripts = () if SIGNED in description else (DISCOVERY,)  # a tools' line listed: no help turn
            talk, as_json = (
                Conversation(_prompt(task, files), definitions),
                Conversation(_prompt(task, files), definitions),
            )
            start = time.perf_counter()
            body: dict[str, Any] = {}
            for script in (*scripts, f"F={files}\n{task.script()}"):
                result = await client.call_tool("bash", {"script": script})  # the SDK checks it against outputSchema
                body = dict(result.structured_content or {})
                call = {"name": "mcp__toolshell__bash", "input": {"script": script}}
                talk.add(call, render(result))
                as_json.add(call, json.dumps(body, ensure_ascii=False, separators=(",", ":")))
            seconds = time.perf_counter() - start
        answer = str(body.get("stdout", "")).strip()
        problems = task.verify(files, answer)
        if not body.get("success", body.get("exit_code") == 0):
            problems.insert(0, f"the script failed: {json.dumps(body)[:300]}")
        run = Run(talk, answer, problems, seconds, len(scripts), started, listed_s, as_json)
        runs.append(run)
    return definitions, runs


def side(runs: list[Run]) -> dict[str, Any]:
    """One way of one task over the rounds: the first round's tokens (checked equal in the others)."""
    return (
        rounds_summary(runs)
        | {
            "discovery_result_tokens": sum(runs[0].talk.results[: runs[0].discovery]),
            "initialize_ms_p50": 1000 * statistics.median(r.started for r in runs),
            "first_list_ms_samples": [round(1000 * r.listed, 2) for r in runs],
        }
        | _json_shape(runs[0])
    )


def _json_shape(run: Run) -> dict[str, Any]:
    """The same turns' tokens had each `bash` result been the JSON envelope."""
    if run.as_json is None:
        return {}
    return {"as_json": {"result_tokens": sum(run.as_json.results), "cumulative": run.as_json.cumulative()}}


async def measure(
    root: Path, tasks: list[FsTask], rounds: int, ways: tuple[str, ...]
) -> tuple[dict[str, Any], dict[str, list[Run]]]:
    """`rounds` rounds of every task, the ways alternating which goes first: the JSON-ready result
    per task and way, and each way's runs of the first round (their transcripts)."""
    shutil.rmtree(root, ignore_errors=True)
    runs: dict[str, list[list[Run]]] = {way: [] for way in ways}
    definitions: dict[str, int] = {}
    order = {"direct": direct_round, "toolshell": toolshell_round}
    for n in range(rounds):
        for way in ways if n % 2 == 0 else ways[::-1]:
            definitions[way], done = await order[way](tasks, root / "world")
            runs[way].append(done)
    per_task = []
    for i, task in enumerate(tasks):
        row: dict[str, Any] = {"task": task.name, "kind": task.kind}
        row |= {way: side([done[i] for done in runs[way]]) for way in ways}
        per_task.append(row)
    result = {"definitions": definitions, "tasks": per_task, "rounds": rounds, "toolshell_src": toolshell.__file__}
    return result, {way: done[0] for way, done in runs.items()}


def transcripts(tasks: list[FsTask], first: dict[str, list[Run]], width: int = 600) -> str:
    """Each task's turns, each way, results cut at `width` characters."""
    lines = []
    for i, task in enumerate(tasks):
        for way, done in first.items():
            lines.append(f"--- {task.name} ({way})")
            for call, output in done[i].talk.transcript:
                lines += [f">>> {call}", output if len(output) <= width else output[:width] + " [...]"]
    return "\n".join(lines)


def totals(rows: list[dict[str, Any]], way: str, against: str = "direct") -> dict[str, Any]:
    """`way` against `against` over the set, and the three targets."""
    mine = [r[way] for r in rows]
    theirs = [r[against] for r in rows]
    cumulative = (sum(s["cumulative"] for s in theirs), sum(s["cumulative"] for s in mine))
    results = (sum(s["result_tokens"] for s in theirs), sum(s["result_tokens"] for s in mine))
    over = [r["task"] for r in rows if r[way]["result_tokens"] > r[against]["result_tokens"]]
    # Where the help turn is what tips a task over: the same comparison without it.
    work = [r[way]["result_tokens"] - r[way]["discovery_result_tokens"] for r in rows]
    over_without_help = [r["task"] for r, w in zip(rows, work, strict=True) if w > r[against]["result_tokens"]]
    shape = {}
    if all("as_json" in s for s in mine):  # the JSON envelope's figures, against the same direct calls
        json_cumulative = sum(s["as_json"]["cumulative"] for s in mine)
        shape = {
            "as_json": {
                "result_tokens": sum(s["as_json"]["result_tokens"] for s in mine),
                "cumulative": json_cumulative,
                "ratio": cumulative[0] / json_cumulative,
                "tasks_over": [
                    r["task"] for r in rows if r[way]["as_json"]["result_tokens"] > r[against]["result_tokens"]
                ],
            }
        }
    walls = {w: statistics.median(s["wall_ms"]["p50"] for s in side) for w, side in ((against, theirs), (way, mine))}
    starts = {
        w: statistics.median(s["initialize_ms_p50"] + s["first_list_ms_p50"] for s in side)
        for w, side in ((against, theirs), (way, mine))
        if all("first_list_ms_p50" in s for s in side)
    }
    return shape | {
        "wall_ms_p50_of_task_p50s": walls,
        "start_to_first_list_ms_p50": starts,
        "success": f"{sum(s['success'] for s in mine)}/{len(mine)}",
        "result_tokens": {against: results[0], way: results[1]},
        "cumulative": {against: cumulative[0], way: cumulative[1], "ratio": cumulative[0] / cumulative[1]},
        "targets": {
            "result_tokens_at_most_direct_on_every_task": not over,
            "tasks_over": over,
            "tasks_over_without_the_help_turn": over_without_help,
            "no_discovery_turn": all(s["discovery_turns"] == 0 for s in mine),
            f"cumulative_{TARGET_RATIO}x_below_over_the_set": cumulative[0] / cumulative[1] >= TARGET_RATIO,
        },
    }


def before_run(rev: str, args: argparse.Namespace) -> dict[str, Any]:
    """The toolshell way on commit `rev`'s `src/`, in a child process (the same benchmark code)."""
    with tempfile.TemporaryDirectory(prefix="toolshell-before-") as tmp:
        archive = subprocess.run(["git", "archive", rev, "src"], cwd=HERE.parent, capture_output=True)
        if archive.returncode:
            sys.exit(f"cannot read {rev}'s src (git archive: {archive.stderr.decode().strip()}); pass --no-before")
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        out = Path(tmp) / "before.json"
        command = [sys.executable, __file__, "--ways", "toolshell", "--rounds", str(args.rounds), "--out", str(out)]
        command += ["--world", str(args.world.with_name(args.world.name + "-before")), "--only", *args.only]
        env = {**os.environ, "PYTHONPATH": f"{tmp}/src"}
        subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
        child = json.loads(out.read_text())
    if not child["toolshell_src"].startswith(tmp):
        sys.exit(f"the before run imported toolshell from {child['toolshell_src']}, not {rev}'s src")
    return child | {"rev": rev}


def table(result: dict[str, Any]) -> str:
    ways = [w for w in ("direct", "toolshell", "before") if w in result["tasks"][0]]
    head = f"{'task':<15}" + "".join(f"{'| ' + w:<36}" for w in ways)
    sub = f"{'':<15}" + f"{'| ok turns results cumul p50/p95 ms':<36}" * len(ways)
    lines = [f"filesystem tasks, {result['rounds']} rounds, o200k_base", head, sub]
    for row in result["tasks"]:
        cells = []
        for w in ways:
            s = row[w]
            wall = f"{s['wall_ms']['p50']:.0f}/{s['wall_ms']['p95']:.0f}"
            ok = "yes" if s["success"] else "NO"
            cells.append(f"| {ok:<3}{s['turns']:>4}{s['result_tokens']:>8}{s['cumulative']:>7} {wall:>11} ")
        lines.append(f"{row['task']:<15}" + "".join(cells))
    for label, t in result["totals"].items():
        c, r = t["cumulative"], t["result_tokens"]
        lines += [
            "",
            f"{label}: success {t['success']}; result tokens {' / '.join(f'{v:,}' for v in r.values())};"
            f" cumulative {c[next(iter(c))]:,} / {list(c.values())[1]:,} = {c['ratio']:.1f}x",
            f"  targets: {json.dumps(t['targets'])}",
        ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--world", type=Path, default=Path("/tmp/toolshell-filesystem"), help="emptied, then used")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", nargs="*", default=[], help="task names (default: all)")
    parser.add_argument("--ways", default="direct,toolshell", help=argparse.SUPPRESS)
    parser.add_argument("--before", metavar="REV", default=BEFORE, help=f"the build compared (default {BEFORE})")
    parser.add_argument("--no-before", action="store_true", help="skip the before build")
    parser.add_argument("--out", type=Path, default=HERE / "filesystem_results.json")
    parser.add_argument("--transcript", action="store_true", help="also print every call and result of round 1")
    args = parser.parse_args()
    unknown = sorted(set(args.only) - {t.name for t in TASKS})
    if unknown or args.rounds < 1:
        parser.error(
            f"no task {', '.join(unknown)}; the tasks: {', '.join(t.name for t in TASKS)}"
            if unknown
            else "--rounds must be at least 1"
        )
    tasks = [t for t in TASKS if not args.only or t.name in args.only]
    ways = tuple(args.ways.split(","))
    result, first = anyio.run(measure, args.world, tasks, args.rounds, ways)
    if args.transcript:
        print(transcripts(tasks, first))
    if args.before and not args.no_before and "direct" in ways:
        before = before_run(args.before, args)
        result["before"] = {k: before[k] for k in ("rev", "definitions")}
        for row, old in zip(result["tasks"], before["tasks"], strict=True):
            row["before"] = old["toolshell"]
    if "direct" in ways:
        result["totals"] = {w: totals(result["tasks"], w) for w in ("toolshell", "before") if w in result["tasks"][0]}
    result |= {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cores": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "versions": {p: version(p) for p in ("mcp", "bashkit", "bpe-openai")},
        "server": "@modelcontextprotocol/server-filesystem " + _npm_version(),
        "tokenizer": "o200k_base (bpe-openai, vocabulary bundled in the wheel)",
    }
    if "direct" not in ways:  # a child run for --before: the parent checks where toolshell came from
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        return
    del result["toolshell_src"]
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(table(result))
    failed = [f"{r['task']} ({w})" for r in result["tasks"] for w in ("direct", "toolshell") if not r[w]["success"]]
    sys.exit(f"not done exactly: {', '.join(failed)}" if failed else 0)


def _npm_version() -> str:
    package = NODE_BIN.parent / "@modelcontextprotocol" / "server-filesystem" / "package.json"
    return str(json.loads(package.read_text())["version"])


if __name__ == "__main__":
    main()
