"""CPU of one script run in bashkit, the ways a host can run it with a Python `tools` builtin.

    python benchmarks/script_thread.py [--runs N]

Issue 31's script (`echo $i >> log; tools text-length; wc -l < log`), with `tools` an async
Python function that awaits once on the event loop (where an MCP client session lives), run
three ways on uvloop, each in a fresh shell (bashkit stops a shell after 1,000 runs):

- `async execute`: bashkit's `await bash.execute(…)` with `tools` as an async builtin: the bare
  bridge's way, and toolshell's. bashkit compiles a Python wrapper (`<bashkit_cancel_wrapper>`)
  on every run of a shell that has a Python builtin, whether the script calls it or not.
- `thread + loop bridge`: `bash.execute_sync(…)` in a worker thread, `tools` a synchronous builtin
  that runs the async one on the loop and waits (`anyio.from_thread.run`).
- `async execute, no builtin`: the floor: the same script without `tools`.

It reports the process's CPU (user + system, all threads) and wall time a run, and checks that
the first two printed the same. toolshell keeps the first way although the second costs about
half (issue 31's sixth round, benchmarks/README.md): in bashkit 0.20.1, `Bash.cancel()` takes
effect only between commands and the execution timeout cannot end a synchronous builtin, so a
cancelled or timed-out script in a thread would finish its `sleep 20`, its slow `curl` or its
nested call first; cancelling the async `execute` drops the run at once.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from bashkit import Bash, BuiltinContext, BuiltinResult, ExecutionProfile

SCRIPT = "echo $((RUNS + 1)) >> log; RUNS=$((RUNS + 1)); tools text-length; wc -l < log"
FLOOR = "echo $((RUNS + 1)) >> log; RUNS=$((RUNS + 1)); wc -l < log"
PER_SHELL = 900
"""Runs in one shell (bashkit's session limit is 1,000)."""


async def _tools(ctx: BuiltinContext) -> BuiltinResult:
    await anyio.lowlevel.checkpoint()  # an await on the loop: a nested call's round trip
    return BuiltinResult(stdout="5\n")


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _runner(name: str) -> Callable[[str], Awaitable[Any]]:
    """A fresh shell's run, the way `name` runs it."""
    if name == "thread + loop bridge":
        token = anyio.lowlevel.current_token()

        def bridged(ctx: BuiltinContext) -> BuiltinResult:  # the script's thread: the call runs on the loop
            return anyio.from_thread.run(_tools, ctx, token=token)

        threaded = Bash(profile=ExecutionProfile.Interactive, custom_builtins={"tools": bridged})
        return lambda script: anyio.to_thread.run_sync(
            lambda: threaded.execute_sync(script, on_output=lambda o, e: None)
        )
    bash = Bash(
        profile=ExecutionProfile.Interactive,
        custom_builtins={"tools": _tools} if name == "async execute" else None,
    )
    return lambda script: bash.execute(script, on_output=lambda o, e: None)


async def _way(name: str, runs: int) -> tuple[float, float, str]:
    """CPU and wall µs a run, and the last run's output."""
    cpu = wall = 0.0
    out, left = "", runs
    script = FLOOR if name == "async execute, no builtin" else SCRIPT
    while left:
        n, left = min(left, PER_SHELL), left - min(left, PER_SHELL)
        run = _runner(name)
        await run("true")  # the shell's first run
        c, t = _cpu(), time.perf_counter()
        for _ in range(n):
            result = await run(script)
        cpu, wall = cpu + _cpu() - c, wall + time.perf_counter() - t
        if result.exit_code != 0:
            raise SystemExit(f"{name}: exit {result.exit_code}: {result.stderr}")
        out = result.stdout
    return 1e6 * cpu / runs, 1e6 * wall / runs, out


def measure(runs: int) -> dict[str, Any]:
    figures: dict[str, Any] = {"runs": runs}

    async def main() -> None:
        for name in ("async execute", "thread + loop bridge", "async execute, no builtin"):
            cpu, wall, out = await _way(name, runs)
            figures[name] = {"cpu_us": round(cpu, 1), "wall_us": round(wall, 1), "last_output": out}

    anyio.run(main, backend_options={"use_uvloop": True})
    async_way, threaded = figures["async execute"], figures["thread + loop bridge"]
    figures["same_output"] = async_way["last_output"] == threaded["last_output"]
    figures["cpu_ratio_thread_to_async"] = round(threaded["cpu_us"] / async_way["cpu_us"], 2)
    return figures


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2000)
    args = parser.parse_args()
    print(json.dumps(measure(args.runs), indent=2))


if __name__ == "__main__":
    cli()
