"""A grant belongs to the program serving the tool, not to the server's name.

Two configs both call a server `evil`: program A (`evil_server.py a`) and program B
(`evil_server.py b`), listing the same tool. An "always" given while A ran does not let B's calls
through; going back to A, it applies again; the grants listing names the server and its command
(secrets masked).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from toolshell.frontends.cli import main
from toolshell.host import Host
from toolshell.policy.approvals import Approvals
from toolshell.registry.entry import ToolEntry
from toolshell.store.sqlite import Store

pytestmark = pytest.mark.anyio
EVIL = Path(__file__).parent / "servers" / "evil_server.py"
TOKEN = "s3cr3t-token-value-42"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _config(tmp_path: Path, flavor: str) -> Path:
    """A config naming program `flavor` `evil` (A is given a token in its arguments)."""
    log = tmp_path / "executions.log"
    extra = ', "--token=${EVIL_TOKEN}"' if flavor == "a" else ""
    path = tmp_path / f"config-{flavor}.toml"
    path.write_text(
        "include_builtins = false\n[[mcp.servers]]\n"
        f'name = "evil"\ncommand = {json.dumps(sys.executable)}\n'
        f'args = [{json.dumps(str(EVIL))}, "{flavor}", {json.dumps(str(log))}{extra}]\n'
    )
    return path


def _executions(tmp_path: Path) -> list[str]:
    log = tmp_path / "executions.log"
    return log.read_text().splitlines() if log.exists() else []


async def _run(tmp_path: Path, flavor: str, what: str) -> dict[str, object] | None:
    """Run `tools evil delete what=…` on program `flavor`; the stop report, or None when it ran."""
    async with Host.open(_config(tmp_path, flavor), state_dir=tmp_path / "state") as host:
        result = await host.session().run(f"tools evil delete what={what}")
    return result.tools["stopped"] if result.tools and "stopped" in result.tools else None


def _grants(tmp_path: Path, flavor: str, *json_flag: str) -> str:
    args = ["approvals", "grants", *json_flag, "--config", str(_config(tmp_path, flavor))]
    result = CliRunner().invoke(main, [*args, "--state-dir", str(tmp_path / "state")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


async def test_an_always_grant_follows_the_program_not_the_servers_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVIL_TOKEN", TOKEN)
    stopped = await _run(tmp_path, "a", "one")
    assert stopped is not None and stopped["approval"] == "requested"
    Approvals(Store(tmp_path / "state" / "toolshell.db")).grant(str(stopped["request_id"]), always=True)
    assert await _run(tmp_path, "a", "two") is None

    stopped = await _run(tmp_path, "b", "three")  # another program under the same name asks again
    assert stopped is not None and stopped["approval"] == "requested"
    assert await _run(tmp_path, "a", "four") is None  # program A is still granted
    assert _executions(tmp_path) == ["a two", "a four"]


async def test_the_grants_listing_names_the_server_and_its_command_and_says_when_it_does_not_apply(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVIL_TOKEN", TOKEN)
    stopped = await _run(tmp_path, "a", "one")
    assert stopped is not None
    Approvals(Store(tmp_path / "state" / "toolshell.db")).grant(str(stopped["request_id"]), always=True)
    log = tmp_path / "executions.log"
    program_a = f"{sys.executable} {EVIL} a {log} '--token=***'"
    program_b = f"{sys.executable} {EVIL} b {log}"

    assert _grants(tmp_path, "a") == f"always  tools evil delete  (server evil: {program_a})\n"
    assert _grants(tmp_path, "b") == (
        f"always  tools evil delete  (server evil: {program_a}; not in force: evil now runs {program_b}, "
        "another program)\n"
    )
    [shown] = json.loads(_grants(tmp_path, "b", "--json"))
    del shown["created"]
    assert shown == {
        "kind": "always",
        "tool": "tools evil delete",
        "input": None,
        "server": {"name": "evil", "program": program_a},
        "status": "other_program",
        "note": f"not in force: evil now runs {program_b}, another program",
    }
    state = (tmp_path / "state" / "toolshell.db").read_bytes()
    assert TOKEN.encode() not in state, "the program's secret is hashed, never stored in clear"


def test_a_grant_made_before_grants_recorded_the_program_covers_no_program_and_says_grant_again(
    tmp_path: Path,
) -> None:
    path = tmp_path / "toolshell.db"
    approvals = Approvals(Store(path))
    delete = ToolEntry("evil", "delete", "Delete a thing.", annotations={"destructiveHint": True}, server_id="sha256:a")
    approvals.grant(approvals.request(delete, {"what": "x"}, "s", "destructive").id, always=True)
    approvals.store.execute(
        "UPDATE approval_grants SET server_id=NULL, server_label=NULL"
    )  # as an older version wrote it
    assert not Approvals(Store(path)).is_always(delete)
    [listed] = Approvals(Store(path)).list_grants({})
    assert (listed["status"], listed["note"]) == (
        "unknown",
        "server identity unknown (granted before grants recorded it): grant again",
    )
