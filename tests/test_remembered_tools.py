"""Tool lists that outlive the process (issue 16, item 1): a new process finds an `on_demand`
server's tools by a word of their descriptions, shows its help and judges a plan from the list it
gave before, without starting it; the first call starts it and checks the live schema."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from toolshell.config import load_text
from toolshell.connections.remembered import RememberedTools
from toolshell.redact import Redactor
from toolshell.store.sqlite import Store

SERVER = textwrap.dedent(
    """
    import sys
    from mcp.server.mcpserver import MCPServer
    from mcp_types import ToolAnnotations
    with open(sys.argv[1], "a") as log:  # each start is observable
        log.write("started\\n")
    server = MCPServer("widgets", log_level="WARNING")

    @server.tool(annotations=ToolAnnotations(destructiveHint=True))
    def frobnicate(count: int) -> str:
        \"\"\"Rotate the quux widgets.\"\"\"
        return f"rotated {count}"

    server.run()
    """
)


def _setup(tmp_path: Path, protocol: str = "2025-11-25") -> tuple[Path, Path]:
    """The widgets server, `on_demand`. In the older protocol a list has no `cacheScope`; in
    2026-07-28 the SDK's servers mark every list `private` unless told otherwise."""
    script, log = tmp_path / "widgets.py", tmp_path / "starts.log"
    script.write_text(SERVER)
    config = tmp_path / "toolshell.toml"
    config.write_text(
        f'[approval]\nmode = "off"\n[[mcp.servers]]\nname = "widgets"\ncommand = {json.dumps(sys.executable)}\n'
        f'args = [{json.dumps(str(script))}, {json.dumps(str(log))}]\nload = "on_demand"\nprotocol = "{protocol}"\n'
    )
    return config, log


def _cli(config: Path, tmp_path: Path, script: str) -> subprocess.CompletedProcess[str]:
    exe = str(Path(sys.executable).parent / "toolshell")
    argv = [exe, "run", "--config", str(config), "--state-dir", str(tmp_path / "state"), "-c", script]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def _starts(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_a_new_process_finds_helps_and_plans_from_the_remembered_list_without_starting_the_server(
    tmp_path: Path,
) -> None:
    config, log = _setup(tmp_path)
    first = _cli(config, tmp_path, "tools widgets frobnicate count=2")
    assert (first.returncode, first.stdout, _starts(log)) == (0, "rotated 2\n", 1), first.stderr

    found = _cli(config, tmp_path, "tools search quux")
    listed = _cli(config, tmp_path, "tools --help")
    helped = _cli(config, tmp_path, "tools widgets frobnicate --help")
    planned = _cli(config, tmp_path, "echo 'tools widgets frobnicate count=3' | tools plan")
    assert _starts(log) == 1, "help, search and plan read the remembered list: the server did not start"
    assert "frobnicate" in found.stdout and "quux" in found.stdout
    assert "widgets       (not loaded, 1 tool)\n" in listed.stdout
    assert "count" in helped.stdout and "Rotate the quux widgets" in helped.stdout
    plan = json.loads(planned.stdout)
    assert plan["calls"][0] == {
        "tool": "tools widgets frobnicate",
        "input": {"count": 3},
        "risk": "changes",
        "where": "script",
    }

    again = _cli(config, tmp_path, "tools widgets frobnicate count=4")
    assert (again.stdout, _starts(log)) == ("rotated 4\n", 2), "the first call starts it, with the live schema"


def test_a_list_the_server_marks_private_is_never_remembered(tmp_path: Path) -> None:
    config, log = _setup(tmp_path, protocol="auto")
    first = _cli(config, tmp_path, "tools widgets frobnicate count=2")
    listed = _cli(config, tmp_path, "tools --help")
    assert first.stdout == "rotated 2\n" and "widgets       (not loaded)\n" in listed.stdout


def test_a_list_is_filed_under_the_program_and_its_filters_and_expires_with_its_ttl(tmp_path: Path) -> None:
    import mcp_types as types

    remembered = RememberedTools(Store(tmp_path / "s.db"), Redactor())
    config = load_text('[[mcp.servers]]\nname = "evil"\ncommand = "prog-a"\n')
    [server] = config.mcp.servers
    tool = types.Tool(name="t", input_schema={"type": "object"})
    remembered.remember(server, [tool], None)
    other_program = server.model_copy(update={"command": "prog-b"})
    filtered = server.model_copy(update={"tools": ["t"]})
    assert [t.name for t in remembered.recall(server) or []] == ["t"]
    assert remembered.recall(other_program) is None and remembered.recall(filtered) is None
    remembered.remember(server, [tool], 0)  # ttlMs 0: already stale
    assert remembered.recall(server) is None
