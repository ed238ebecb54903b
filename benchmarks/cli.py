"""The whole `toolshell` process, cold and warm, against `python -c 'import mcp'` and mcporter.

Usage: `python benchmarks/cli.py [--rounds N] [--quick] [--no-mcporter] [--out FILE]`.

Each timed command is one process, `time.perf_counter` around `subprocess.run`, its answer checked
(echo must print `hi`, the call must return the time JSON, `servers` must list `time` with its
tools); a wrong answer stops the run, since timing a failure would be wrong. The config names one
server, `mcp-server-time` (the dev extra installs it), in a temporary config and state dir.

- cold: no daemon running (and `--no-daemon` where the command has it). `python -c 'pass'` and
  `python -c 'import mcp'` (the floor any Python MCP client pays), `toolshell run -c 'echo hi'`,
  `toolshell run -c 'tools time get-current-time timezone=UTC'` and `toolshell servers`.
- warm: after `toolshell daemon start` for that config and state dir, the same three toolshell
  commands (reported as not available when this checkout has no `toolshell daemon`).
- mcporter, when `npm view mcporter version` answers: that release installed with `npm install
  --prefix <tmp>/npm mcporter@VERSION`, its `.bin/mcporter` run directly (no `npx`), the same server in its config with
  `"lifecycle": "keep-alive"`. Cold: `MCPORTER_DISABLE_KEEPALIVE=time` (a fresh server per call);
  warm: after `mcporter daemon start`. `node -e 0` is its floor.

Cases alternate within a phase, their order rotating every round; one unmeasured run of each comes
first (not with `--quick`). Median and p90 in ms; `cli_results.json` is written beside this file.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
BIN = Path(sys.executable).parent
ECHO = "echo hi"
CALL = "tools time get-current-time timezone=UTC"
TIMEOUT = 120  # seconds for one command; a cold call here takes 1-2 s
TARGETS_MS = {"echo_warm": 40.0, "time_warm": 50.0}
COLD_ECHO_OVER_IMPORT_MCP = 1.5


class BenchmarkError(Exception):
    """A timed command failed or answered wrongly: the run stops rather than time a failure."""


@dataclass(frozen=True)
class Case:
    name: str
    argv: list[str]
    env: dict[str, str]
    check: Callable[[str], str]  # stdout -> a short form of the answer; raises ValueError if wrong
    shown: str  # the command as the table and the JSON show it


def _ok(stdout: str) -> str:
    return "exit 0"


def _hi(stdout: str) -> str:
    if stdout != "hi\n":
        raise ValueError(f"expected 'hi', got {stdout[:200]!r}")
    return "hi"


def _time_json(stdout: str) -> str:
    try:
        answer = json.loads(stdout)
    except ValueError:
        answer = None
    if not (isinstance(answer, dict) and answer.get("timezone") == "UTC" and "datetime" in answer):
        raise ValueError(f"not the time JSON: {stdout[:200]!r}")
    return f"UTC {answer['datetime']}"


def _servers(stdout: str) -> str:
    line = next((x for x in stdout.splitlines() if re.match(r"time\s.*\btools=[1-9]", x)), None)
    if line is None:
        raise ValueError(f"`time` with its tools is not listed: {stdout[:300]!r}")
    return " ".join(line.split())


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT, check=False)


def _timed(case: Case, cwd: Path) -> tuple[float, str]:
    started = time.perf_counter()
    done = _run(case.argv, case.env, cwd)
    elapsed = (time.perf_counter() - started) * 1000
    if done.returncode != 0:
        raise BenchmarkError(f"{case.shown}: exit {done.returncode}\n{done.stderr[-1500:]}")
    try:
        return elapsed, case.check(done.stdout)
    except ValueError as wrong:
        raise BenchmarkError(f"{case.shown}: {wrong}") from None


def measure(cases: list[Case], rounds: int, cwd: Path, *, warmup: bool = True) -> dict[str, dict[str, Any]]:
    """Every case `rounds` times, alternating, the order rotating each round; each run's answer checked."""
    if warmup:
        for case in cases:
            _timed(case, cwd)
    samples: dict[str, list[float]] = {c.name: [] for c in cases}
    answers: dict[str, str] = {}
    for r in range(rounds):
        for case in cases[r % len(cases) :] + cases[: r % len(cases)]:
            ms, answers[case.name] = _timed(case, cwd)
            samples[case.name].append(ms)
    return {c.name: _summary(c, samples[c.name], answers[c.name]) for c in cases}


def _summary(case: Case, ms: list[float], answer: str) -> dict[str, Any]:
    p90 = statistics.quantiles(ms, n=10, method="inclusive")[-1] if len(ms) > 1 else ms[0]
    return {
        "command": case.shown,
        "median_ms": statistics.median(ms),
        "p90_ms": p90,
        "runs": len(ms),
        "answer": answer,
        "samples_ms": ms,
    }


class Toolshell:
    """This checkout's `toolshell` on its own `src`, with one temporary config (the time server) and
    state dir."""

    def __init__(self, tmp: Path) -> None:
        server = shutil.which("mcp-server-time", path=str(BIN)) or shutil.which("mcp-server-time")
        if server is None:
            raise BenchmarkError("mcp-server-time is missing: pip install -e '.[dev]'")
        self.server, self.config, self.state = server, tmp / "toolshell.toml", tmp / "state"
        self.config.write_text(
            f'[[mcp.servers]]\nname = "time"\ncommand = {json.dumps(server)}\nargs = ["--local-timezone", "UTC"]\n'
        )
        clean = {k: v for k, v in os.environ.items() if not k.startswith("TOOLSHELL_")}
        self.env = {**clean, "PYTHONPATH": str(SRC)}
        self.base = [*entry_point(), "--config", str(self.config), "--state-dir", str(self.state)]

    def case(self, name: str, args: list[str], check: Callable[[str], str]) -> Case:
        return Case(name, [*self.base, *args], self.env, check, shlex.join(["toolshell", *args]))

    def commands(self, phase: str, cwd: Path) -> list[Case]:
        """Cold, with no daemon running, also says `--no-daemon` where the command has it, so that a
        daemon started on first use (`[cli] keep_warm`) cannot turn later cold runs warm."""
        run, servers = (self.no_daemon(sub, cwd) if phase == "cold" else [sub] for sub in ("run", "servers"))
        return [
            self.case(f"echo_{phase}", [*run, "-c", ECHO], _hi),
            self.case(f"time_{phase}", [*run, "-c", CALL], _time_json),
            self.case(f"servers_{phase}", servers, _servers),
        ]

    def no_daemon(self, command: str, cwd: Path) -> list[str]:
        said = _run([*self.base, command, "--help"], self.env, cwd).stdout
        return [command, "--no-daemon"] if "--no-daemon" in said else [command]

    def python(self) -> list[Case]:
        return [
            Case("python_pass", [sys.executable, "-c", "pass"], self.env, _ok, "python -c 'pass'"),
            Case("python_import_mcp", [sys.executable, "-c", "import mcp"], self.env, _ok, "python -c 'import mcp'"),
        ]

    def has_daemon(self, cwd: Path) -> bool:
        return _run([*self.base, "daemon", "--help"], self.env, cwd).returncode == 0

    def daemon(self, action: str, cwd: Path, *extra: str) -> str:
        done = _run([*self.base, "daemon", action, *extra], self.env, cwd)
        if done.returncode != 0:
            raise BenchmarkError(f"toolshell daemon {action}: exit {done.returncode}\n{done.stderr[-1500:]}")
        return done.stdout

    @contextmanager
    def warm(self, cwd: Path) -> Iterator[int | None]:
        """The daemon running for the block, which gets its request count so far."""
        self.daemon("start", cwd)
        try:
            yield served(json.loads(self.daemon("status", cwd, "--json")))
        finally:
            self.daemon("stop", cwd)


def entry_point() -> list[str]:
    """This checkout's `toolshell` command, as its console script runs it (`[project.scripts]` in
    pyproject.toml): the installed script may be another checkout's."""
    target = tomllib.loads((HERE.parent / "pyproject.toml").read_text())["project"]["scripts"]["toolshell"]
    module, function = target.split(":")
    return [sys.executable, "-c", f"import sys; from {module} import {function}; sys.exit({function}())"]


def served(status: Any) -> int | None:
    """The daemon's count of requests served, wherever `daemon status --json` puts it."""
    if isinstance(status, dict):
        for key, value in status.items():
            if isinstance(value, int) and not isinstance(value, bool) and re.search("request|served", key):
                return value
        return next((n for v in status.values() if (n := served(v)) is not None), None)
    if isinstance(status, list):
        return next((n for v in status if (n := served(v)) is not None), None)
    return None


class Mcporter:
    """mcporter from npm in `<tmp>/npm`, run in `<tmp>` (paths below are relative to it) with its own
    home and daemon dir, so it reads no other config and meets no other daemon."""

    def __init__(self, tmp: Path, server: str, release: str) -> None:
        (tmp / "home").mkdir()
        definition = {"command": server, "args": ["--local-timezone", "UTC"], "lifecycle": "keep-alive"}
        (tmp / "mcporter.json").write_text(json.dumps({"mcpServers": {"time": definition}, "imports": []}))
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("MCPORTER_", "XDG_"))}
        self.npm_env = clean  # npm keeps the user's own npm config (registry, proxy)
        self.env = {**clean, "HOME": str(tmp / "home"), "MCPORTER_DAEMON_DIR": str(tmp / "mcporter-state")}
        self.bin = str(tmp / "npm" / "node_modules" / ".bin" / "mcporter")
        # The release `npm view` names: left to pick, npm takes the newest whose `engines` fit this node.
        self.install = ["npm", "install", "--prefix", "npm", "--no-audit", "--no-fund", f"mcporter@{release}"]
        self.call = ["call", "--config", "mcporter.json", "time.get_current_time", "timezone=UTC", "--output", "json"]
        self.config = (tmp / "mcporter.json").read_text()

    def installed(self, cwd: Path) -> str:
        done = _run(self.install, self.npm_env, cwd)
        if done.returncode != 0:
            raise BenchmarkError(f"{shlex.join(self.install)}: exit {done.returncode}\n{done.stderr[-1500:]}")
        return _run([self.bin, "--version"], self.env, cwd).stdout.strip()

    def shown(self, phase: str) -> str:
        cold = "MCPORTER_DISABLE_KEEPALIVE=time " if phase == "cold" else ""
        return cold + shlex.join(["mcporter", *self.call])

    def cases(self, phase: str) -> list[Case]:
        env = {**self.env, "MCPORTER_DISABLE_KEEPALIVE": "time"} if phase == "cold" else self.env
        return [Case(f"mcporter_{phase}", [self.bin, *self.call], env, _time_json, self.shown(phase))]

    def daemon(self, action: str, cwd: Path) -> str:
        done = _run([self.bin, *self.daemon_args(action)], self.env, cwd)
        if done.returncode != 0:
            raise BenchmarkError(f"mcporter daemon {action}: exit {done.returncode}\n{done.stderr[-1500:]}")
        return done.stdout

    @contextmanager
    def warm(self, cwd: Path) -> Iterator[None]:
        self.daemon("start", cwd)
        try:
            yield
        finally:
            self.daemon("stop", cwd)

    @staticmethod
    def daemon_args(action: str) -> list[str]:
        return ["--config", "mcporter.json", "daemon", action]

    def commands(self) -> dict[str, str]:
        return {
            "install": shlex.join(self.install),
            "config (mcporter.json)": self.config,
            "env": "HOME=<tmp>/home MCPORTER_DAEMON_DIR=<tmp>/mcporter-state",
            "cold": self.shown("cold"),
            "daemon_start": shlex.join(["mcporter", *self.daemon_args("start")]),
            "warm": self.shown("warm"),
            "daemon_stop": shlex.join(["mcporter", *self.daemon_args("stop")]),
        }


def npm_release(cwd: Path) -> str | None:
    """mcporter's latest release, or None when npm (or node) is missing or the registry does not answer."""
    if shutil.which("npm") is None or shutil.which("node") is None:
        return None
    try:
        done = subprocess.run(
            ["npm", "view", "mcporter", "version"], cwd=cwd, capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        return None
    return (done.stdout.strip() or None) if done.returncode == 0 else None


def run_benchmark(rounds: int, *, quick: bool = False, mcporter: bool = True) -> dict[str, Any]:
    """Both phases in one temporary directory; the summary `cli_results.json` holds."""
    with tempfile.TemporaryDirectory(prefix="tsbench-") as name:
        tmp = Path(name)
        ts = Toolshell(tmp)
        summary: dict[str, Any] = {"date": datetime.now(UTC).isoformat(timespec="seconds"), "rounds": rounds}
        summary["quick"], summary["machine"] = quick, _machine()
        porter = _mcporter(tmp, ts, summary) if mcporter else None
        if not mcporter:
            summary["mcporter"] = {"status": "skipped (--no-mcporter)"}
        cold = ts.python() + ts.commands("cold", tmp) + (_node_floor(ts) + porter.cases("cold") if porter else [])
        summary["cases"] = measure(cold, rounds, tmp, warmup=not quick)
        daemon = ts.has_daemon(tmp)
        summary["warm"] = "measured" if daemon else "not available (this toolshell has no `toolshell daemon`)"
        warm = (ts.commands("warm", tmp) if daemon else []) + (porter.cases("warm") if porter else [])
        if warm:
            summary["cases"] |= _warm(warm, ts if daemon else None, porter, rounds, tmp, quick, summary)
        summary["targets"] = targets(summary["cases"])
        return summary


def _mcporter(tmp: Path, ts: Toolshell, summary: dict[str, Any]) -> Mcporter | None:
    release = npm_release(tmp)
    if release is None:
        summary["mcporter"] = {"status": "skipped (npm not reachable)"}
        return None
    porter = Mcporter(tmp, ts.server, release)
    summary["mcporter"] = {"status": "measured", "version": porter.installed(tmp), "commands": porter.commands()}
    summary["machine"]["node"] = _run(["node", "--version"], porter.env, tmp).stdout.strip()
    return porter


def _node_floor(ts: Toolshell) -> list[Case]:
    return [Case("node_empty", ["node", "-e", "0"], ts.env, _ok, "node -e 0")]


def _warm(
    cases: list[Case],
    ts: Toolshell | None,
    porter: Mcporter | None,
    rounds: int,
    tmp: Path,
    quick: bool,
    summary: dict[str, Any],
) -> dict[str, dict[str, Any]]:
    """The warm phase, the daemons up; then the toolshell daemon's request count (when its status
    gives one) must have grown by at least the number of warm toolshell runs, or they bypassed it."""
    with ExitStack() as up:
        before = up.enter_context(ts.warm(tmp)) if ts else None
        if porter:
            up.enter_context(porter.warm(tmp))
        results = measure(cases, rounds, tmp, warmup=not quick)
        if porter and "time: connected" not in (said := porter.daemon("status", tmp)):
            raise BenchmarkError(f"mcporter's daemon does not hold the time server: {said[:300]!r}")
        if ts:
            status = summary["daemon_status"] = json.loads(ts.daemon("status", tmp, "--json"))
            after = served(status)
            runs = sum(not c.name.startswith("mcporter") for c in cases) * (rounds + (0 if quick else 1))
            if before is not None and after is not None and after - before < runs:
                raise BenchmarkError(f"the daemon served {after - before} requests for {runs} warm runs")
            summary["daemon_use"] = (
                "not verified (no request count)" if after is None else f"{after - (before or 0)} served"
            )
    return results


def targets(cases: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Issue 16's targets, each with the figure measured and whether it is met (None: not measured)."""
    rows: list[dict[str, Any]] = []
    for name, limit in TARGETS_MS.items():
        value = cases.get(name, {}).get("median_ms")
        met = None if value is None else value <= limit
        rows.append({"what": f"{name} median ms", "target": limit, "value": value, "met": met})
    ratio = cases["echo_cold"]["median_ms"] / cases["python_import_mcp"]["median_ms"]
    what = "echo_cold / python_import_mcp"
    rows.append(
        {"what": what, "target": COLD_ECHO_OVER_IMPORT_MCP, "value": ratio, "met": ratio <= COLD_ECHO_OVER_IMPORT_MCP}
    )
    return rows


def table(summary: dict[str, Any]) -> str:
    cases = summary["cases"]
    rows = [f"{'case':<18} {'median ms':>10} {'p90 ms':>9}  command"]
    rows += [f"{n:<18} {c['median_ms']:>10.1f} {c['p90_ms']:>9.1f}  {c['command']}" for n, c in cases.items()]
    porter = summary["mcporter"]
    rows += ["", f"warm: {summary['warm']}", f"mcporter: {porter['status']}"]
    if "version" in porter:
        rows[-1] += f", version {porter['version']} (node {summary['machine']['node']})"
    for t in summary["targets"]:
        value = "not available" if t["value"] is None else f"{t['value']:.2f}"
        verdict = {True: "met", False: "not met", None: "not available"}[t["met"]]
        rows.append(f"target: {t['what']} = {value} (at most {t['target']}): {verdict}")
    for phase in ("cold", "warm"):
        ours, theirs = cases.get(f"time_{phase}"), cases.get(f"mcporter_{phase}")
        if ours and theirs:
            ratio = ours["median_ms"] / theirs["median_ms"]
            rows.append(
                f"the time call, {phase}: toolshell {ours['median_ms']:.1f} ms, mcporter"
                f" {theirs['median_ms']:.1f} ms (toolshell / mcporter {ratio:.2f})"
            )
    return "\n".join(rows)


def _machine() -> dict[str, Any]:
    cpu = next((x.split(":", 1)[1].strip() for x in _cpuinfo() if x.startswith("model name")), platform.processor())
    return {"cores": os.cpu_count(), "cpu": cpu, "python": platform.python_version(), "mcp": version("mcp")}


def _cpuinfo() -> list[str]:
    try:
        return Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return []


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def cli() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=20, help="timed runs of each command (default 20)")
    parser.add_argument("--quick", action="store_true", help="no unmeasured first run of each command")
    parser.add_argument("--no-mcporter", action="store_true", help="leave mcporter out")
    parser.add_argument("--out", default=str(HERE / "cli_results.json"), help="where to write the JSON results")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    try:
        summary = run_benchmark(args.rounds, quick=args.quick, mcporter=not args.no_mcporter)
    except BenchmarkError as failed:
        sys.exit(f"benchmark stopped: {failed}")
    print(table(summary))
    Path(args.out).write_text(json.dumps(_rounded(summary), indent=2) + "\n")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    cli()
