"""CPU of one nested `tools` call in-process (issue 31, round 2).

    python benchmarks/nested_call.py [--calls N] [--rounds R] [--profile FILE]

One `Host` with the shipped `text_metrics` server (connected in-process); each round runs
`for i in $(seq 1 N); do tools text-metrics text-length text=x$i >/dev/null; done` and, as the
floor, the same loop with `true` in place of the call, and reports this process's CPU
(`time.process_time`) per call: the loop's, and the loop's minus the floor's (the nested call's
own cost, bashkit's hop to the builtin included). Medians over rounds, the two loops alternated.
"""

from __future__ import annotations

import argparse
import cProfile
import statistics
import tempfile
import time

import anyio

from toolshell.config import Config
from toolshell.host import Host


def loop(calls: int, command: str) -> str:
    return f"for i in $(seq 1 {calls}); do {command} >/dev/null; done"


async def main(calls: int, rounds: int, profile: str | None) -> None:
    config = Config.model_validate(
        {"tools_in_shell": {"call_limit": calls * 2 + 10}, "approval": {"mode": "off"}, "telemetry": {"enabled": False}}
    )
    with tempfile.TemporaryDirectory() as state_dir:
        async with Host.open(config, state_dir=state_dir) as host:
            first = await host.run("tools text-metrics text-length text=hello")
            assert first.exit_code == 0, first
            tools_cpu: list[float] = []
            floor_cpu: list[float] = []
            for r in range(rounds):
                for which in ("tools", "floor") if r % 2 == 0 else ("floor", "tools"):
                    command = "tools text-metrics text-length text=x$i" if which == "tools" else "true"
                    c0 = time.process_time()
                    result = await host.run(loop(calls, command))
                    cpu = time.process_time() - c0
                    assert result.exit_code == 0, result
                    (tools_cpu if which == "tools" else floor_cpu).append(cpu / calls * 1e6)
            tools_us, floor_us = statistics.median(tools_cpu), statistics.median(floor_cpu)
            print(
                f"calls {calls} x {rounds} rounds: loop with the call {tools_us:.0f} µs/call, floor {floor_us:.0f}, "
                f"nested call {tools_us - floor_us:.0f} µs (min {min(tools_cpu) - min(floor_cpu):.0f})"
            )
            if profile:
                prof = cProfile.Profile()
                prof.enable()
                await host.run(loop(calls, "tools text-metrics text-length text=x$i"))
                prof.disable()
                prof.dump_stats(profile)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile")
    args = parser.parse_args()
    anyio.run(main, args.calls, args.rounds, args.profile)
