"""Output past bashkit's own cap (issue 30, item 9): bashkit keeps at most 10 MiB of a shell call's
stdout and drops the rest (bashkit 0.20.1 has no setting for it). A script that prints 20 MB gets
a result that says so at its end, where the script's last line would be, instead of passing off
the output around the 10 MiB mark as the tail; the file holds the first 10,000,000 bytes."""

from __future__ import annotations

import re

import pytest

from toolshell.config import Config
from toolshell.host import Host
from toolshell.shell.output import SHELL_OUTPUT_LIMIT

pytestmark = pytest.mark.anyio
# 20,000 lines of 1,000 zeros and a newline (20,020,000 bytes), then the line the cut loses.
TWENTY_MB = "x=$(printf '%01000d' 0); for i in $(seq 1 20000); do echo $x; done; echo rc=0"


async def test_a_script_printing_20_mb_gets_a_result_that_says_the_shell_cut_its_end_and_where() -> None:
    async with Host.open(Config.model_validate({"shell": {"timeout_seconds": 120}})) as host:
        session = host.session()
        try:
            result = await session.run(TWENTY_MB)
            path = re.search(r"they are in (/home/user/tool-output/\S+\.stdout)\]", result.stdout)
            assert path is not None, result.stdout[-600:]
            saved = await session.run(f"wc -c < {path[1]}; tail -c 5 {path[1]}")
        finally:
            session.close()
    last = result.stdout.splitlines()[-1]
    assert result.exit_code == 0
    assert "rc=0" not in result.stdout, "the line past the cap is gone: the result must not pretend otherwise"
    assert last.startswith(f"[the shell stopped collecting this output at {SHELL_OUTPUT_LIMIT:,} bytes")
    assert "its last lines too, is lost" in last
    assert len(result.stdout.encode()) <= host.config.tools_in_shell.max_output_bytes
    assert saved.stdout == "10000000\n00000", "the file holds the first 10,000,000 bytes, as the marker says"
