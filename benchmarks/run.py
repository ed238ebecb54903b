"""Per-call overhead of toolshell's `tools` command against the raw MCP SDK client.

    python benchmarks/run.py [--calls N] [--rounds R] [--profile]

Both modes call the same stdio echo server (`echo_server.py`) N times in a row:

- raw: `mcp.client.Client(StdioServerParameters(...))`, N sequential `call_tool("echo", ...)`;
- toolshell: one `Host.run` script, `for i in $(seq 1 N); do tools echo echo text=hi >/dev/null; done`.

The modes alternate within each round (and swap order every round) so machine noise hits both
alike; figures are medians over rounds. Connection set-up is timed apart from the calls: the raw
client's connect, `Host.open`, and the host's first shell call (catalog build). `--profile` adds
one cProfile'd toolshell run and prints where its time goes. Results go to `results.json` here.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio
from mcp import StdioServerParameters
from mcp.client import Client

from toolshell.config import Config
from toolshell.host import Host

HERE = Path(__file__).resolve().parent
SERVER = str(HERE / "echo_server.py")


def toolshell_config(calls: int) -> Config:
    """The echo server as a toolshell stdio server; nothing asks, and the budget fits N calls."""
    return Config.model_validate(
        {
            "mcp": {"servers": [{"name": "echo", "type": "stdio", "command": sys.executable, "args": [SERVER]}]},
            "tools_in_shell": {"call_limit": calls + 10},
            "approval": {"mode": "off"},
        }
    )


def loop_script(calls: int, command: str) -> str:
    return f"for i in $(seq 1 {calls}); do {command} >/dev/null; done"


async def raw_round(calls: int) -> dict[str, float]:
    """Connect the SDK client, then time N sequential echo calls."""
    started = time.perf_counter()
    async with Client(StdioServerParameters(command=sys.executable, args=[SERVER])) as client:
        connected = time.perf_counter()
        first = await client.call_tool("echo", {"text": "hi"})
        assert first.content[0].text == "hi", first  # type: ignore[union-attr]
        t0 = time.perf_counter()
        for _ in range(calls):
            await client.call_tool("echo", {"text": "hi"})
        total = time.perf_counter() - t0
    return {"connect_s": connected - started, "total_s": total}


async def toolshell_round(calls: int, profiler: cProfile.Profile | None = None) -> dict[str, float]:
    """Open a host, time its first shell call, a warm empty one, then the N-call script."""
    with tempfile.TemporaryDirectory() as state_dir:
        started = time.perf_counter()
        async with Host.open(toolshell_config(calls), state_dir=state_dir) as host:
            opened = time.perf_counter()
            first = await host.run("tools echo echo text=hi")
            first_done = time.perf_counter()
            assert (first.exit_code, first.stdout) == (0, "hi\n"), first
            t0 = time.perf_counter()
            await host.run("true")  # a warm shell call: session + catalog rebuild, no tool call
            warm = time.perf_counter() - t0
            t0 = time.perf_counter()
            await host.run(loop_script(calls, ":"))  # the same loop with a no-op builtin
            loop_only = time.perf_counter() - t0
            if profiler is not None:
                profiler.enable()
            t0 = time.perf_counter()
            result = await host.run(loop_script(calls, "tools echo echo text=hi"))
            total = time.perf_counter() - t0
            if profiler is not None:
                profiler.disable()
            assert (result.exit_code, result.stdout, result.stderr) == (0, "", ""), result
            # A read-only script leaves no report; the timeline proves every call completed.
            (row,) = host.store.query("SELECT count(*) FROM nested_calls WHERE outcome = 'completed'")
            assert row[0] == calls + 1, f"{row[0] - 1} of {calls} calls completed"
    return {
        "host_open_s": opened - started,
        "first_shell_call_s": first_done - opened,
        "warm_shell_call_s": warm,
        "loop_only_s": loop_only,
        "total_s": total,
    }


def median(rounds: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in rounds)


def summarize(calls: int, raw: list[dict[str, float]], shell: list[dict[str, float]]) -> dict[str, Any]:
    raw_total, shell_total = median(raw, "total_s"), median(shell, "total_s")
    raw_us, shell_us = raw_total / calls * 1e6, shell_total / calls * 1e6
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "cores": os.cpu_count(),
            "cpu": _cpu_name(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "mcp": version("mcp"),
            "bashkit": version("bashkit"),
        },
        "calls": calls,
        "rounds": len(raw),
        "raw": {"total_s": raw_total, "per_call_us": raw_us, "rounds_total_s": [r["total_s"] for r in raw]},
        "toolshell": {
            "total_s": shell_total,
            "per_call_us": shell_us,
            "rounds_total_s": [r["total_s"] for r in shell],
        },
        "ratio": shell_total / raw_total,
        "overhead_per_call_us": shell_us - raw_us,
        "fixed": {
            "raw_connect_s": median(raw, "connect_s"),
            "host_open_s": median(shell, "host_open_s"),
            "first_shell_call_s": median(shell, "first_shell_call_s"),
            "warm_shell_call_s": median(shell, "warm_shell_call_s"),
        },
        "shell_loop_only": {
            "total_s": median(shell, "loop_only_s"),
            "per_iteration_us": median(shell, "loop_only_s") / calls * 1e6,
        },
    }


def table(s: dict[str, Any]) -> str:
    m = s["machine"]
    rows = [
        f"toolshell benchmark: {s['calls']} sequential echo calls over stdio, median of {s['rounds']} rounds",
        f"{s['date']}  {m['cores']} cores  {m['cpu']}  Python {m['python']}  mcp {m['mcp']}  bashkit {m['bashkit']}",
        "",
        f"{'mode':<12}{'total s':>10}{'per call us':>14}",
        f"{'raw SDK':<12}{s['raw']['total_s']:>10.3f}{s['raw']['per_call_us']:>14.1f}",
        f"{'toolshell':<12}{s['toolshell']['total_s']:>10.3f}{s['toolshell']['per_call_us']:>14.1f}",
        "",
        f"ratio toolshell/raw        {s['ratio']:.2f}x",
        f"overhead per call          {s['overhead_per_call_us']:.1f} us",
        f"  of which the bare loop   {s['shell_loop_only']['per_iteration_us']:.1f} us  (same loop, `:` for `tools`)",
        "",
        "fixed costs (median)",
        f"  raw SDK connect          {s['fixed']['raw_connect_s'] * 1000:.1f} ms",
        f"  Host.open                {s['fixed']['host_open_s'] * 1000:.1f} ms",
        f"  first shell call         {s['fixed']['first_shell_call_s'] * 1000:.1f} ms  (catalog build + 1 call)",
        f"  warm empty shell call    {s['fixed']['warm_shell_call_s'] * 1000:.1f} ms  (`true`: session + catalog)",
    ]
    return "\n".join(rows)


def _rounded(value: Any) -> Any:
    """Floats to 6 places (a microsecond of a second) so the JSON stays readable."""
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


async def main(calls: int, rounds: int, profile: bool) -> dict[str, Any]:
    raw: list[dict[str, float]] = []
    shell: list[dict[str, float]] = []
    for r in range(rounds):
        # Swap the order every round so neither mode always runs on a warmer (or busier) machine.
        if r % 2 == 0:
            raw.append(await raw_round(calls))
            shell.append(await toolshell_round(calls))
        else:
            shell.append(await toolshell_round(calls))
            raw.append(await raw_round(calls))
        times = f"raw {raw[-1]['total_s']:.3f} s, toolshell {shell[-1]['total_s']:.3f} s"
        print(f"round {r + 1}/{rounds}: {times}", file=sys.stderr)
    summary = summarize(calls, raw, shell)
    if profile:
        profiler = cProfile.Profile()
        await toolshell_round(calls, profiler)
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out).sort_stats("cumulative")
        stats.print_stats(40)
        stats.sort_stats("tottime").print_stats(25)
        print(out.getvalue())
    return summary


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--calls", type=int, default=1000, help="sequential echo calls per mode (default 1000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; figures are medians (default 3)")
    parser.add_argument("--profile", action="store_true", help="also cProfile one toolshell run and print it")
    parser.add_argument("--out", default=str(HERE / "results.json"), help="where to write the JSON results")
    args = parser.parse_args()
    if args.calls < 1 or args.rounds < 1:
        parser.error("--calls and --rounds must be at least 1")
    summary = anyio.run(main, args.calls, args.rounds, args.profile)
    print(table(summary))
    Path(args.out).write_text(json.dumps(_rounded(summary), indent=2) + "\n")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    cli()
