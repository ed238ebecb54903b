"""What a shell that outlives a process costs: saving and restoring it by handle, per call.

    python benchmarks/scale.py [--calls N] [--postgres URL]

For a small shell, and for one holding 1 MB and 10 MB of files (random text, so compression does
not hide the size), three ways in the same run, on each engine (SQLite in a temp dir, and
PostgreSQL when `--postgres` or `TOOLSHELL_TEST_POSTGRES_URL` names one):

- bare: `Session.run("true")` in a session kept in memory (the floor: no handle at all);
- same worker: `Shells.run` on one worker, call after call (each call saves an incremental commit);
- alternating: two workers on one store taking turns (each call checks the shell out, then saves).

Reported: the median per call, and the cost added over bare. Results go to `scale_results.json`.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from toolshell.host import Host
from toolshell.shell.handles import ShellHandles
from toolshell.shells import Shells
from toolshell.store.engines import open_store
from toolshell.store.keys import new_key
from toolshell.store.protocol import StateStore

HERE = Path(__file__).resolve().parent
SIZES = {"small": 0, "1 MB": 1 << 20, "10 MB": 10 << 20}


CHUNK = 2 << 20
"""Bytes a fill script writes (bashkit takes scripts of up to 10 MB)."""


def _fill(size: int) -> list[str]:
    """Scripts that write `size` bytes of random base64 text into the shell, a file per 2 MB."""
    scripts = ["echo kept > state.txt; X=1; greet(){ echo hi; }"]
    for n, start in enumerate(range(0, size, CHUNK)):
        text = base64.b64encode(os.urandom(min(CHUNK, size - start) * 3 // 4)).decode()
        scripts.append(f"cat > data{n}.txt <<'EOF'\n{text}\nEOF")
    return scripts


async def _median_ms(calls: int, step: Any) -> float:
    times = []
    for i in range(calls):
        started = time.perf_counter()
        await step(i)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


async def _measure(store_for: Any, state: Path, size: int, calls: int) -> dict[str, float]:
    keys = [new_key().encode()]
    async with Host.open(state_dir=state / "a") as one, Host.open(state_dir=state / "b") as two:
        bare = one.session()
        for script in _fill(size):
            await bare.run(script)
        stores: list[StateStore] = [store_for(), store_for()]
        workers = [
            Shells(h, ShellHandles(s, idle_seconds=3600, max_per_caller=8, max_bytes=64 << 20), keys)
            for h, s in zip((one, two), stores, strict=True)
        ]
        handle = workers[0].new("bench")
        for script in _fill(size):
            await workers[0].run("bench", handle, script)
        figures = {
            "bare_ms": await _median_ms(calls, lambda i: bare.run("true")),
            "same_worker_ms": await _median_ms(calls, lambda i: workers[0].run("bench", handle, "true")),
            "alternating_ms": await _median_ms(calls, lambda i: workers[i % 2].run("bench", handle, "true")),
        }
        _, objects = bare.commit()
        figures["commit_bytes"] = sum(len(d) for d in objects.values())
        figures["files_bytes"] = int((await bare.run("cat *.txt | wc -c")).stdout.strip() or 0)
        for w in workers:
            w.close()
        for s in stores:
            s.close()
    figures["added_same_worker_ms"] = figures["same_worker_ms"] - figures["bare_ms"]
    figures["added_alternating_ms"] = figures["alternating_ms"] - figures["bare_ms"]
    return figures


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--postgres", default=os.environ.get("TOOLSHELL_TEST_POSTGRES_URL"))
    args = parser.parse_args()
    results: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "calls": args.calls,
        "engines": {},
    }
    engines: dict[str, Any] = {"sqlite": None}
    if args.postgres:
        engines["postgresql"] = args.postgres
    for engine, url in engines.items():
        results["engines"][engine] = {}
        for label, size in SIZES.items():
            with tempfile.TemporaryDirectory() as tmp:
                state = Path(tmp)
                where = url or str(state / "shared" / "state.db")
                figures = await _measure(lambda where=where: open_store(where), state, size, args.calls)
            results["engines"][engine][label] = figures
            print(
                f"{engine:10} {label:6}  bare {figures['bare_ms']:6.2f} ms"
                f"  same worker {figures['same_worker_ms']:6.2f} ms (+{figures['added_same_worker_ms']:.2f})"
                f"  alternating {figures['alternating_ms']:6.2f} ms (+{figures['added_alternating_ms']:.2f})"
                f"  files {figures['files_bytes']} B, full commit {figures['commit_bytes']} B",
                flush=True,
            )
    (HERE / "scale_results.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(anyio.run(main))
