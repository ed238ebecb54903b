"""Bad input to the command line gets one clear line and an exit code, never a Python traceback:
numbers out of range, bytes that are not UTF-8, and a server whose answer the SDK cannot parse."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from _cli_support import Ran, toolshell
from toolshell.frontends import cli
from toolshell.frontends.cli import _Toolshell


def _one_error(ran: Ran, code: int) -> str:
    """The run's one error line (click's usage block aside), after checking the exit code."""
    assert "Traceback" not in ran.stderr, ran.stderr
    assert ran.returncode == code, ran.stderr
    errors = [line for line in ran.stderr.splitlines() if line.startswith(("Error: ", "toolshell: "))]
    assert len(errors) == 1, ran.stderr
    return errors[0]


# --- numbers -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["timeline", "--limit", "99999999999999999999"],
            "Error: Invalid value for '--limit': 99999999999999999999 is not in the range 1<=x<=1000000.",
        ),
        (["timeline", "--limit", "0"], "Error: Invalid value for '--limit': 0 is not in the range 1<=x<=1000000."),
        (
            ["auth", "login", "x", "--timeout", "1e400"],
            "Error: Invalid value for '--timeout': inf is not in the range 0<x<=86400.",
        ),
        (
            ["auth", "login", "x", "--timeout", "nan"],
            "Error: Invalid value for '--timeout': 'nan' is not a number of seconds",
        ),
        (
            ["web", "--port", "99999999999999999999"],
            "Error: Invalid value for '--port': 99999999999999999999 is not in the range 0<=x<=65535.",
        ),
    ],
)
def test_a_number_out_of_range_is_one_usage_error(args: list[str], expected: str) -> None:
    assert _one_error(toolshell(*args), 2) == expected


# --- bytes that are not UTF-8 --------------------------------------------------------------------

SCRIPT_FIX = "write it as UTF-8, and make other bytes inside the script, e.g. printf '\\xff'"


@pytest.mark.parametrize("command", ["run", "plan"])
def test_a_script_given_with_c_that_is_not_utf8_is_refused_with_how_to_write_the_byte(command: str) -> None:
    ran = toolshell(command, "-c", b"echo \xff")
    assert _one_error(ran, 2) == (
        f"Error: Invalid value for '-c': the script is not UTF-8 text (byte 0xff at character 5); {SCRIPT_FIX}"
    )


@pytest.mark.parametrize("args", [["run"], ["run", "-"], ["plan"], ["scripts", "save", "x"]])
def test_a_script_on_stdin_that_is_not_utf8_is_refused(args: list[str]) -> None:
    ran = toolshell(*args, stdin=b"echo caf\xe9\n")
    assert _one_error(ran, 1) == (
        "Error: the script on stdin is not UTF-8 text (byte 0xe9 at character 8); "
        "write it as UTF-8, and make other bytes inside the script, e.g. printf '\\xe9'"
    )


def test_a_saved_scripts_input_on_stdin_that_is_not_utf8_is_refused() -> None:
    ran = toolshell("scripts", "count", "-", stdin=b'{"text": "caf\xe9"}')
    assert _one_error(ran, 1) == (
        "Error: the input on stdin is not UTF-8 text (byte 0xe9 at character 13); write it as UTF-8"
    )


def test_a_script_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    (tmp_path / "s.sh").write_bytes(b"echo \xff\n")
    ran = toolshell("run", "s.sh", cwd=tmp_path)
    assert _one_error(ran, 1) == f"Error: the script in s.sh is not UTF-8 text (byte 0xff at character 5); {SCRIPT_FIX}"


@pytest.mark.parametrize(
    ("args", "place"),
    [
        (["timeline", "--session", b"\xff"], "'--session'"),
        (["approvals", "grant", b"\xff"], "'REQUEST_ID'"),
        (["approvals", "deny", b"\xff"], "'REQUEST_ID'"),
        (["approvals", "revoke", b"\xff"], "'TOOL...'"),
        (["scripts", b"\xff"], "'[ARGS]...'"),
        (["run", "--role", b"\xff", "-c", "true"], "'--role'"),
    ],
)
def test_an_argument_that_is_not_utf8_is_one_usage_error(args: list[str | bytes], place: str) -> None:
    line = _one_error(toolshell(*args), 2)
    assert line.startswith(f"Error: Invalid value for {place}: ")
    assert line.endswith("is not UTF-8 text (byte 0xff at character 0); write it as UTF-8")


def test_the_interactive_shell_drops_a_line_that_is_not_utf8_and_goes_on() -> None:
    ran = toolshell("shell", stdin=b"echo \xff\necho after\n")
    assert "Traceback" not in ran.stderr
    assert (ran.returncode, ran.stdout) == (0, "after\n")
    assert f"toolshell: the line is not UTF-8 text (byte 0xff at character 5); {SCRIPT_FIX}" in ran.stderr


def test_a_checkout_whose_path_is_not_utf8_can_be_trusted_and_used(tmp_path: Path) -> None:
    checkout = Path(str(tmp_path).encode().decode() + "/caf\udce9")  # the directory `caf\xe9`
    checkout.mkdir()
    (checkout / "toolshell.toml").write_text('[[mcp.servers]]\nname = "later"\ncommand = "true"\nload = "on_demand"\n')
    trusted = toolshell("config", "trust", "--yes", cwd=checkout)
    used = toolshell("servers", "--json", cwd=checkout)
    assert trusted.returncode == 0 and trusted.stdout.splitlines()[-1].startswith("trusted "), trusted.stderr
    assert "Traceback" not in used.stderr and "ignoring" not in used.stderr
    assert "later" in [row["name"] for row in json.loads(used.stdout)]


# --- a server's answer the SDK cannot parse ------------------------------------------------------


class _NotJson(BaseHTTPRequestHandler):
    """A Streamable HTTP 'server' that answers every POST with `{not json` as application/json."""

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b"{not json"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        self.send_response(405)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_DELETE = do_GET  # noqa: N815 - the stdlib's name

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def not_json_config(tmp_path: Path) -> Iterator[Path]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotJson)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    config = tmp_path / "toolshell.toml"
    url = f"http://127.0.0.1:{server.server_address[1]}/mcp"
    config.write_text(
        f'[[mcp.servers]]\nname = "broken"\ntype = "http"\nurl = "{url}"\nheaders = {{ Authorization = "Bearer t" }}\n'
    )
    yield config
    server.shutdown()
    server.server_close()


def test_an_sdk_log_record_about_a_server_that_sends_not_json_is_one_line_without_a_traceback(
    not_json_config: Path,
) -> None:
    ran = toolshell("--config", str(not_json_config), "servers", "--json")
    assert ran.returncode == 0
    assert "Traceback" not in ran.stderr
    logged = [line for line in ran.stderr.splitlines() if "Error parsing JSON response" in line]
    assert logged, ran.stderr
    for line in logged:
        assert line.startswith("toolshell: mcp.client.streamable_http: Error parsing JSON response (ValidationError: ")
        assert line.endswith("; --debug shows the traceback)")
    assert set(ran.stderr.splitlines()) == set(logged)  # nothing else: each record is its one line
    broken = next(row for row in json.loads(ran.stdout) if row["name"] == "broken")
    assert "Failed to parse JSON response" in broken["last_error"]


@pytest.mark.parametrize("switch", [["--debug"], []])
def test_debug_logging_keeps_the_sdks_traceback(not_json_config: Path, switch: list[str]) -> None:
    env = {} if switch else {"TOOLSHELL_DEBUG": "1"}
    ran = toolshell(*switch, "--config", str(not_json_config), "servers", "--json", env=env)
    assert ran.returncode == 0
    assert "Error parsing JSON response\nTraceback (most recent call last):" in ran.stderr


# --- the last line of defence --------------------------------------------------------------------


def test_an_unexpected_error_is_one_line_naming_it_and_debug_shows_the_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    @click.group(cls=_Toolshell)
    def group() -> None:
        pass

    @group.command()
    def boom() -> None:
        raise RuntimeError("something\nbroke")

    quiet = CliRunner().invoke(group, ["boom"])
    monkeypatch.setattr(cli, "debugging", lambda: True)
    debugging = CliRunner().invoke(group, ["boom"])
    assert (quiet.exit_code, quiet.stderr) == (
        1,
        "toolshell: unexpected error: RuntimeError: something broke; rerun with --debug for the traceback\n",
    )
    assert isinstance(debugging.exception, RuntimeError)  # raised on: click's runner holds the traceback
