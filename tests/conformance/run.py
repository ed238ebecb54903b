"""Run the MCP conformance suite against toolshell and compare with `expected_failures.toml`.

    python tests/conformance/run.py --node NODE --suite DIST_INDEX_JS [--jobs 2] [--out DIR]

Client side: every client scenario the pinned suite lists, each against `client.py`. Server side:
the protocol-level scenarios (`SERVER_SCENARIOS`) against `toolshell serve --http`, started here on
a free 127.0.0.1 port and stopped after. The other server scenarios need the suite's "everything"
server (its test tools, resources and prompts), which a server that exposes only `bash` is not.

`serve --http` requires a bearer token. When the suite's `server` command can send a header
(`--header`), it sends the token and the server runs with authentication on; otherwise the server
runs with `--no-auth` (loopback). The pinned 0.1.16 has no such option (nor has its main branch of
2026-08-07), so today the server scenarios run with `--no-auth`; the run says which.

Exits 1 on an unexpected failure (a regression) or an unexpected pass (a stale expected failure),
so the file always says exactly what fails and why. `scripts/conformance.sh` installs the suite and
calls this.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shlex
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXPECTED = HERE / "expected_failures.toml"
SERVER_SCENARIOS = [
    "server-initialize",
    "ping",
    "tools-list",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
]
SCENARIO_TIMEOUT_MS = 30_000


@dataclass(frozen=True)
class Outcome:
    side: str
    scenario: str
    passed: bool
    seconds: float


def list_scenarios(node: str, suite: str, side: str) -> list[str]:
    """The scenario names `conformance list --client|--server` prints, in its order."""
    out = subprocess.run([node, suite, "list", f"--{side}"], check=True, capture_output=True, text=True).stdout
    return re.findall(r"^\s+- (\S+)", out, flags=re.MULTILINE)


def load_expected(path: Path = EXPECTED) -> dict[str, dict[str, str]]:
    """`{"client": {scenario: reason}, "server": {...}}` from the expected-failures file."""
    data = tomllib.loads(path.read_text())
    return {
        side: {name: entry["reason"] for name, entry in data.get(side, {}).items()} for side in ("client", "server")
    }


def _run(side: str, scenario: str, argv: list[str], out: Path, log: Path) -> Outcome:
    start = time.monotonic()
    with log.open("w") as f:
        code = subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT, cwd=out, timeout=120).returncode
    return Outcome(side, scenario, code == 0, time.monotonic() - start)


def run_client(node: str, suite: str, scenarios: list[str], out: Path, jobs: int) -> list[Outcome]:
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(HERE / 'client.py'))}"

    def one(s: str) -> Outcome:
        argv = [node, suite, "client", "--command", command, "--scenario", s, "--timeout", str(SCENARIO_TIMEOUT_MS)]
        return _run("client", s, [*argv, "-o", str(out / "client")], out, out / f"client-{s.replace('/', '_')}.log")

    with ThreadPoolExecutor(jobs) as pool:
        return list(pool.map(one, scenarios))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(port: int, proc: subprocess.Popen[bytes], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"toolshell serve --http exited with {proc.returncode} before serving")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"toolshell serve --http did not listen on 127.0.0.1:{port} within {seconds:.0f}s")


def sends_headers(node: str, suite: str) -> bool:
    """Whether the suite's `server` command takes `--header` (so it can send the bearer token)."""
    help_text = subprocess.run([node, suite, "server", "--help"], capture_output=True, text=True).stdout
    return re.search(r"^\s+--header\b", help_text, flags=re.MULTILINE) is not None


def server_auth(node: str, suite: str) -> tuple[list[str], list[str], dict[str, str]]:
    """`(serve flags, suite flags, serve environment)`: the token when the suite can send it, else `--no-auth`."""
    if sends_headers(node, suite):
        token = secrets.token_urlsafe(32)
        return [], ["--header", f"Authorization: Bearer {token}"], {"TOOLSHELL_SERVE_TOKEN": token}
    return ["--no-auth"], [], {}


def run_server(node: str, suite: str, scenarios: list[str], out: Path) -> list[Outcome]:
    port = free_port()
    toolshell = str(Path(sys.executable).parent / "toolshell")
    serve_flags, suite_flags, env = server_auth(node, suite)
    how = "with the bearer token" if env else "with --no-auth (the suite's `server` command cannot send a header)"
    print(f"server scenarios: against toolshell serve --http {how}")
    with tempfile.TemporaryDirectory() as state, (out / "serve.log").open("w") as log:
        argv = [toolshell, "serve", "--http", "--port", str(port), "--state-dir", state, *serve_flags]
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **env})
        try:
            _wait_for(port, proc)
            url = f"http://127.0.0.1:{port}/mcp"
            return [
                _run(
                    "server",
                    s,
                    [node, suite, "server", "--url", url, "--scenario", s, *suite_flags, "-o", str(out / "server")],
                    out,
                    out / f"server-{s}.log",
                )
                for s in scenarios
            ]
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def compare(outcomes: list[Outcome], expected: dict[str, dict[str, str]]) -> list[str]:
    """One line per surprise: a failure not expected, or an expected failure that passed."""
    problems = []
    for o in outcomes:
        reason = expected[o.side].get(o.scenario)
        if not o.passed and reason is None:
            problems.append(f"{o.side} {o.scenario}: FAILED unexpectedly (see its log)")
        elif o.passed and reason is not None:
            problems.append(f"{o.side} {o.scenario}: PASSED but is listed as an expected failure ({reason}); remove it")
    return problems


def report(outcomes: list[Outcome], expected: dict[str, dict[str, str]]) -> None:
    for o in outcomes:
        mark = "pass" if o.passed else ("xfail" if o.scenario in expected[o.side] else "FAIL")
        print(f"  {mark:5} {o.side:6} {o.scenario} ({o.seconds:.1f}s)")
    for side in ("client", "server"):
        mine = [o for o in outcomes if o.side == side]
        print(f"{side}: {sum(o.passed for o in mine)} of {len(mine)} passed")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--node", required=True, help="Node >= 22")
    parser.add_argument("--suite", required=True, help="the suite's dist/index.js")
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("CONFORMANCE_JOBS", "2")))
    parser.add_argument("--out", type=Path, default=None, help="where logs and results go (default: a temp dir)")
    parser.add_argument("--side", choices=("client", "server", "both"), default="both", help="which scenarios to run")
    args = parser.parse_args()
    args.node, args.suite = str(Path(args.node).resolve()), str(Path(args.suite).resolve())
    out = (args.out or Path(tempfile.mkdtemp(prefix="toolshell-conformance-"))).resolve()
    out.mkdir(parents=True, exist_ok=True)
    expected = load_expected()
    unknown = [
        f"{side} {name}"
        for side in ("client", "server")
        for name in expected[side]
        if name not in list_scenarios(args.node, args.suite, side)
    ]
    if unknown:
        print(f"expected_failures.toml names scenarios the suite does not have: {', '.join(unknown)}", file=sys.stderr)
        return 1
    start = time.monotonic()
    outcomes: list[Outcome] = []
    if args.side != "server":
        outcomes += run_client(args.node, args.suite, list_scenarios(args.node, args.suite, "client"), out, args.jobs)
    if args.side != "client":
        outcomes += run_server(args.node, args.suite, SERVER_SCENARIOS, out)
    report(outcomes, expected)
    problems = compare(outcomes, expected)
    print(f"conformance: {time.monotonic() - start:.0f}s; logs in {out}")
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
