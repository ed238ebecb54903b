"""A working directory with a config of counted servers (each start is logged to a file, so
"warm" is observable), its state dir, and the real entry point run there in a subprocess."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from toolshell.frontends.daemon import control
from toolshell.frontends.daemon.address import address_for

ENTRY = [sys.executable, "-c", "from toolshell.frontends.entry import main; main()"]
COUNTED = textwrap.dedent(
    """
    import sys
    from mcp.server.mcpserver import MCPServer
    from mcp_types import ToolAnnotations
    with open(sys.argv[1], "a") as log:  # each start is observable
        log.write("started\\n")
    server = MCPServer(sys.argv[2], log_level="WARNING")

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def ping() -> str:
        return "pong from " + sys.argv[2]

    server.run()
    """
)


class Place:
    """A working directory with a config of counted servers, and its state dir."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.cwd = root / "work"
        self.cwd.mkdir()
        self.state = root / "state"
        self.program = root / "counted.py"
        self.program.write_text(COUNTED)
        self.config = self.cwd / "tools.toml"
        self.write_config(["counted"])

    def write_config(self, names: list[str], extra: str = "", path: Path | None = None) -> None:
        text = "".join(
            f'[[mcp.servers]]\nname = "{name}"\ncommand = {json.dumps(sys.executable)}\n'
            f"args = [{json.dumps(str(self.program))}, {json.dumps(str(self.starts(name)))}, {json.dumps(name)}]\n"
            for name in names
        )
        (path or self.config).write_text(text + extra)

    def starts(self, name: str = "counted") -> Path:
        return self.root / f"{name}.starts"

    def started(self, name: str = "counted") -> int:
        found = self.starts(name)
        return len(found.read_text().splitlines()) if found.exists() else 0

    def toolshell(
        self, *args: str, stdin: str | None = None, config: bool = True, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        paths = ["--config", str(self.config)] if config else []
        return subprocess.run(
            [*ENTRY, *args[:1], *paths, "--state-dir", str(self.state), *args[1:]],
            cwd=self.cwd,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={**os.environ, **(env or {})},
        )

    def status(self, config: bool = True) -> dict[str, object] | None:
        address = address_for(str(self.config) if config else None, str(self.state), str(self.cwd))
        assert address is not None
        return control.status(address)


def stop_all(place: Place) -> None:
    folder = place.state / "daemons"
    for lock in folder.glob("*.lock") if folder.exists() else []:
        pid = lock.read_text().strip()
        if pid.isdigit():
            try:
                os.kill(int(pid), signal.SIGTERM)
            except ProcessLookupError:
                continue
            wait_for(lambda p=int(pid): not alive(p), "the daemon to exit")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()


def wait_for(condition: object, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


@contextmanager
def placed(root: Path) -> Iterator[Place]:
    """A `Place` in `root`; every daemon it started is stopped at the end."""
    made = Place(root)
    try:
        yield made
    finally:
        stop_all(made)
