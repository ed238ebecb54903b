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
from tokens import (
    NODE_BIN,
    SYSTEM,
    Conversation,
    direct_definitions,
    render,
    tokens,
    toolshell_config,
)

import toolshell
from toolshell.frontends.llm import run_tool_call, tool_definitions
from toolshell.host import Host

HERE = Path(__file__).resolve().parent
DISCOVERY = "tools filesystem --help"
SIGNED = "read-text-file path="
"""In the `bash` description when it lists each tool with its arguments (then discovery takes no turn)."""
TARGET_RATIO = 10
BEFORE = "189c386^"
"""The build before the stop report, the shell handle, compact JSON, per-tool arguments in help and
`key=@file` changed what the model reads."""


def entries(files: Path) -> dict[str, dict[str, Any]]:
    return {"filesystem": {"command": str(NODE_BIN / "mcp-server-filesystem"), "args": [str(files)]}}


@dataclass
class Run:
    """One task done one way once: its conversation, answer, what the verifier found, its time."""

    talk: Conversation
    answer: str
    problems: list[str]
    seconds: float
    discovery: int = 0


def _prompt(task: FsTask, files: Path) -> int:
    return tokens(SYSTEM) + tokens(f"{task.prompt} The files are under {files}.")


async def direct_round(tasks: list[FsTask], root: Path) -> tuple[int, list[Run]]:
    """Every task the direct way, one call per turn, on a fresh folder; the definitions' tokens and the runs."""
    files = world.build(root)
    entry = entries(files)["filesystem"]
    runs = []
    with open(os.devnull, "w") as errlog:  # noqa: ASYNC230 - /dev/null never blocks; drops the start-up banner
        params = StdioServerParameters(command=entry["command"], args=entry["args"])
        async with Client(stdio_client(params, errlog=errlog)) as client:
            listed = (await client.list_tools()).tools
            definitions = tokens(json.dumps(direct_definitions({"filesystem": listed}), ensure_ascii=False))
            for task in tasks:
                talk = Conversation(_prompt(task, files), definitions)

                async def call(tool: str, arguments: dict[str, Any], talk: Conversation = talk) -> str:
                    try:
                        text = render(await client.call_tool(tool, arguments))
                    except MCPError as e:
                        text = f"Error: {e}"
                    talk.add({"name": f"mcp__filesystem__{tool}", "input": arguments}, text)
                    return text

                start = time.perf_counter()
                answer = await task.direct(call, files)
                runs.append(Run(talk, answer, task.verify(files, answer), time.perf_counter() - start))
    return definitions, runs


async def toolshell_round(tasks: list[FsTask], root: Path) -> tuple[int, list[Run]]:
    """Every task through `bash`: its script, after one `tools filesystem --help` turn unless the
    `bash` description already lists the tools with their arguments."""
    files = world.build(root)
    runs = []
    state = root.parent / f"{root.name}-state"
    shutil.rmtree(state, ignore_errors=True)
    async with Host.open(toolshell_config(entries(files)), state_dir=str(state)) as host:
        # What the model is sent: the definitions of this host, its server started and counted.
        defined = await tool_definitions(host, "anthropic")
        definitions = tokens(json.dumps(defined, ensure_ascii=False))
        # A small config's `bash` description carries each tool's arguments: no help turn then.
        scripts = () if SIGNED in defined[0]["description"] else (DISCOVERY,)
        for task in tasks:
            talk = Conversation(_prompt(task, files), definitions)
            session = host.session()
            start = time.perf_counter()
            output = ""
            for script in (*scripts, f"F={files}\n{task.script()}"):
                output = await run_tool_call(session, "bash", {"script": script})
                talk.add({"name": "bash", "input": {"script": script}}, output)
            seconds = time.perf_counter() - start
            result = json.loads(output)
            answer = result.get("stdout", "").strip()
            problems = task.verify(files, answer)
            if not result.get("success", result.get("exit_code") == 0):
                problems.insert(0, f"the script failed: {output[:300]}")
            runs.append(Run(talk, answer, problems, seconds, discovery=len(scripts)))
    return definitions, runs


def _quantile(samples: list[float], q: float) -> float:
    if len(samples) == 1:
        return samples[0]
    return statistics.quantiles(samples, n=100, method="inclusive")[round(q * 100) - 1]


def side(runs: list[Run]) -> dict[str, Any]:
    """One way of one task over the rounds: the first round's tokens (checked equal in the others)."""
    first = runs[0].talk
    seconds = [r.seconds for r in runs]
    return {
        "success": all(not r.problems for r in runs),
        "problems": next((r.problems for r in runs if r.problems), []),
        "answer": runs[0].answer,
        "turns": first.turns,
        "discovery_turns": runs[0].discovery,
        "tool_calls": len(first.calls),
        "definitions": first.definitions,
        "result_tokens": sum(first.results),
        "discovery_result_tokens": sum(first.results[: runs[0].discovery]),
        "cumulative": first.cumulative(),
        "results": first.results,
        "calls": first.calls,
        "tokens_equal_in_every_round": all(r.talk.results == first.results for r in runs),
        "wall_ms": {"p50": 1000 * statistics.median(seconds), "p95": 1000 * _quantile(seconds, 0.95)},
        "wall_ms_samples": [round(1000 * s, 2) for s in seconds],
    }


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
    return {
        "success": f"{sum(s['success'] for s in mine)}/{len(mine)}",
        "result_tokens": {against: results[0], way: results[1]},
        "cumulative": {against: cumulative[0], way: cumulative[1], "ratio": cumulative[0] / cumulative[1]},
        "targets": {
            "result_tokens_at_most_direct_on_every_task": not over,
            "tasks_over": over,
            "tasks_over_without_the_help_turn": over_without_help,
            "discovery_in_one_turn": all(s["discovery_turns"] <= 1 for s in mine),
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
