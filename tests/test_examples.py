"""The examples under `examples/` run as shipped, on the embedded default."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolshell.host import Host

pytestmark = pytest.mark.anyio

EXAMPLES = Path(__file__).parent.parent / "examples"


async def test_the_quickstart_example_prints_real_results_from_the_builtin_servers() -> None:
    async with Host.open() as host:
        result = await host.run((EXAMPLES / "quickstart.sh").read_text())
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("MCP servers")
    start = lines.index("--- text-length of three words, filtered with jq:")
    assert lines[start + 1 : start + 4] == [
        '{"word":"hello","unicode_scalars":5}',
        '{"word":"héllo","unicode_scalars":5}',
        '{"word":"日本語","unicode_scalars":3}',
    ]
    assert lines[-2:] == ["text_metrics: ready", "runtime: ready"]
