"""Every fenced example in README.md and docs/*.md runs, so the docs cannot drift from the code.

How each block is checked, by its language (the first word after the fence):

- `toml`: loads with `load_text` (every `${VAR}` without a default set to a dummy value), and a
  `Host` accepts it (building one parses approval and guard patterns and the rater).
- `json`: parses. An `mcpServers` / `servers` config also loads and is accepted like TOML.
- `python`: executed as `__main__` in a temporary working and state directory.
- `bash` with `tools ` and no `toolshell` line: a script run through `Host` with the in-process
  fake GitHub server and `manage_scripts = true`. It must exit 0, unless the next block of the
  doc is a JSON result (an object with `exit_code`): then every key of it whose value is not `…`
  must equal the run's result (the approval examples and their stop reports); or, when the next
  block is `text shows=model`, it must be the text the model reads of the result (`bash_text`).
- `bash` otherwise: CLI lines. Each `toolshell …` line runs through click's `CliRunner` and must
  exit 0; a `# prints X` comment means its stdout is exactly `X`; an `apr_…` request id is
  replaced by a freshly requested one. Not run (each is asserted to be what it seems): long-running
  servers (`toolshell serve`, `toolshell shell`, `toolshell triggers serve`), `bash scripts/*.sh`
  (the file must exist; they set up a venv and run the whole suite), and the venv/pip set-up line.
  Any other line fails the test. Blocks tagged `file=NAME` are written to the working directory
  first, so CLI lines can name them.
- `text`: not run (a `shows=model` one is checked with the script before it). Any other language fails.
"""

from __future__ import annotations

import json
import re
import shlex
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner

from _github_server import make_github
from toolshell.config import load_text
from toolshell.errors import ConfigError
from toolshell.frontends.cli import main as cli_main
from toolshell.frontends.serve.bash_tool import bash_text
from toolshell.host import Host

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LANGUAGES = ("toml", "json", "python", "bash", "text")
SCRIPT_CONFIG = "[tools_in_shell]\nmanage_scripts = true\n"
ELIDED = "…"

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([^`]*?)\s*$")
_NO_DEFAULT_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_PRINTS = re.compile(r"\s#\s*prints\s+(.*?)\s*$")
_REQUEST_ID = re.compile(r"^apr_[0-9a-z]+$")
_LONG_RUNNING = (("serve",), ("shell",), ("triggers", "serve"))
_SETUP = re.compile(r"^python3? -m venv .*pip install")


@dataclass(frozen=True)
class Block:
    """One fenced code block of a doc."""

    doc: str
    line: int
    lang: str
    text: str
    attrs: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def first_line(self) -> str:
        return next((ln.strip() for ln in self.text.splitlines() if ln.strip()), "")

    @property
    def label(self) -> str:
        return f"{self.doc}:{self.line} ```{self.lang or '(none)'} {self.first_line[:60]}"


def parse_blocks(markdown: str, doc: str) -> list[Block]:
    """The fenced blocks of a Markdown text, in order. A fence closes on the same character, at
    least as long, with nothing after it; the info string is a language then `key=value` words."""
    blocks: list[Block] = []
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence, info = opening.groups()
        words = info.split()
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not _closes(lines[j], fence):
            body.append(lines[j])
            j += 1
        if j == len(lines):
            raise AssertionError(f"{doc}:{i + 1}: the code block opened here is never closed")
        attrs = dict(w.split("=", 1) for w in words[1:] if "=" in w)
        blocks.append(Block(doc, i + 1, words[0] if words else "", "\n".join(body) + "\n", attrs))
        i = j + 1
    return blocks


def _closes(line: str, fence: str) -> bool:
    stripped = line.strip()
    return stripped.startswith(fence[0] * len(fence)) and set(stripped) == {fence[0]}


def _all_blocks() -> list[tuple[Block, Block | None, list[Block]]]:
    """(block, the next block of its doc, every block of its doc) for every doc."""
    out = []
    for path in DOCS:
        blocks = parse_blocks(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
        out += [(b, blocks[k + 1] if k + 1 < len(blocks) else None, blocks) for k, b in enumerate(blocks)]
    return out


BLOCKS = _all_blocks()


# --- the checks, one per kind of block ---------------------------------------------------------


def _env_for(text: str) -> dict[str, str]:
    """A dummy value for every `${VAR}` written without a default; defaults are left to work."""
    return {name: f"dummy-{name.lower()}" for name in _NO_DEFAULT_VAR.findall(text)}


def _check_config(block: Block, tmp_path: Path) -> None:
    config = load_text(block.text, source=block.label, env=_env_for(block.text))
    host = Host(config, state_dir=tmp_path / "host-state")  # parses patterns, guards and the rater
    host.store.close()


def _check_json(block: Block, tmp_path: Path) -> None:
    try:
        data = json.loads(block.text)
    except json.JSONDecodeError as e:
        pytest.fail(f"{block.label}: not valid JSON: {e}")
    if isinstance(data, dict) and ("mcpServers" in data or "servers" in data):
        _check_config(block, tmp_path)


def _check_python(block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code = compile(block.text, block.label, "exec")
    exec(code, {"__name__": "__main__"})


def _is_tools_script(block: Block) -> bool:
    lines = [ln.strip() for ln in block.text.splitlines()]
    return "tools " in block.text and not any(ln.startswith("toolshell ") for ln in lines)


def _expected_result(following: Block | None) -> dict[str, Any] | None:
    """The JSON result shown right after a script, if the doc shows one."""
    if following is None or following.lang != "json":
        return None
    data = json.loads(following.text)
    return data if isinstance(data, dict) and "exit_code" in data else None


def _check_script(block: Block, following: Block | None) -> None:
    async def run() -> Any:
        async with Host.open(load_text(SCRIPT_CONFIG), servers={"github": make_github()}) as host:
            return await host.session().run(block.text)

    result = anyio.run(run).to_json()
    expected = _expected_result(following)
    shown = f"{block.label}\nstdout: {result['stdout']!r}\nstderr: {result['stderr']!r}"
    if following is not None and following.lang == "text" and following.attrs.get("shows") == "model":
        assert bash_text(result).rstrip("\n") == following.text.rstrip("\n"), f"{shown}\nreads: {bash_text(result)!r}"
        return
    if expected is None:
        assert result["exit_code"] == 0, shown
        return
    checked = {k: v for k, v in expected.items() if v != ELIDED}
    assert _elide({k: result.get(k) for k in checked}, checked) == checked, shown


def _elide(actual: Any, expected: Any) -> Any:
    """`actual` with the values the doc elides ("…", e.g. a random request id) replaced by "…"."""
    if expected == ELIDED:
        return ELIDED
    if isinstance(actual, dict) and isinstance(expected, dict):
        return {k: _elide(v, expected.get(k)) for k, v in actual.items()}
    return actual


def _logical_lines(text: str) -> list[str]:
    """Lines with backslash continuations joined; blank and comment-only lines dropped."""
    joined = re.sub(r"\\\n\s*", " ", text)
    return [ln.strip() for ln in joined.splitlines() if ln.strip() and not ln.strip().startswith("#")]


def _pending_request_id() -> str:
    """A fresh pending approval request in the state directory the CLI uses."""
    from toolshell import config as cfg
    from toolshell.policy.approvals import Approvals
    from toolshell.registry.entry import ToolEntry
    from toolshell.store import Store

    store = Store(cfg.state_dir(cfg.Config()) / "toolshell.db")
    try:
        entry = ToolEntry("github", "delete-branch", "Delete a branch.", annotations={"destructiveHint": True})
        return Approvals(store).request(entry, {"branch": "fix-x"}, uuid.uuid4().hex, "destructive").id
    finally:
        store.close()


def _run_cli_line(line: str, label: str) -> None:
    words = shlex.split(line, comments=True)
    args = words[1:]
    if any(tuple(args[: len(cmd)]) == cmd for cmd in _LONG_RUNNING):
        return  # starts a server that runs until stopped; its code is covered by test_serve / test_triggers_*
    args = [_pending_request_id() if _REQUEST_ID.match(a) else a for a in args]
    result = CliRunner().invoke(cli_main, args, catch_exceptions=False)
    shown = f"{label}\n$ {line}\nexit {result.exit_code}\nstdout: {result.stdout!r}\nstderr: {result.stderr!r}"
    assert result.exit_code == 0, shown
    if printed := _PRINTS.search(line):
        assert result.stdout.strip() == printed.group(1), shown


def _check_cli(block: Block, doc_blocks: list[Block], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for other in doc_blocks:
        if "file" in other.attrs:
            (tmp_path / other.attrs["file"]).write_text(other.text, encoding="utf-8")
    for line in _logical_lines(block.text):
        if line.startswith("toolshell "):
            _run_cli_line(line, block.label)
        elif m := re.match(r"^bash (scripts/\S+\.sh)\b", line):
            # Not run here: they create a venv and run the whole suite, which includes this test.
            assert (ROOT / m.group(1)).is_file(), f"{block.label}: {m.group(1)} does not exist"
        elif _SETUP.match(line):
            continue  # the venv and editable install this test already runs in
        else:
            pytest.fail(f"{block.label}: cannot run {line!r}; write a `toolshell …` line or a `tools` script")


# --- the tests -----------------------------------------------------------------------------------


def test_every_doc_has_examples() -> None:
    counts = {str(p.relative_to(ROOT)): 0 for p in DOCS}
    for block, _, _ in BLOCKS:
        counts[block.doc] += 1
    assert "docs/configuration.md" in counts
    assert all(n > 0 for n in counts.values()), counts


def test_the_block_parser_reads_languages_attributes_and_longer_fences() -> None:
    text = "intro\n```json file=a.json\n{}\n```\n\n````text\n```bash\nnot a block\n```\n````\n```\nbare\n```\n"
    assert parse_blocks(text, "x.md") == [
        Block("x.md", 2, "json", "{}\n"),
        Block("x.md", 6, "text", "```bash\nnot a block\n```\n"),
        Block("x.md", 11, "", "bare\n"),
    ]
    assert parse_blocks(text, "x.md")[0].attrs == {"file": "a.json"}


def test_a_cli_line_with_a_wrong_prints_comment_fails() -> None:
    with pytest.raises(AssertionError, match="stdout"):
        _run_cli_line("toolshell run -c 'echo 4'   # prints 5", "x.md:1")


def test_the_documented_unset_variable_error_is_the_one_loading_the_complete_file_gives() -> None:
    blocks = [b for b, _, _ in BLOCKS if b.doc == "docs/configuration.md"]
    complete = next(b for b in blocks if b.lang == "toml")
    shown = next(b for b in blocks if b.lang == "text" and "is not set" in b.text)
    unset = re.search(r"\$\{(\w+)\} is not set", shown.text)
    assert unset is not None
    env = {k: v for k, v in _env_for(complete.text).items() if k != unset.group(1)}
    with pytest.raises(ConfigError) as err:
        load_text(complete.text, env=env)
    assert [f"{place}: {msg}" for place, msg in err.value.problems] == shown.text.splitlines()


@pytest.mark.parametrize(("block", "following", "doc_blocks"), [pytest.param(*b, id=b[0].label) for b in BLOCKS])
def test_the_example_runs(
    block: Block, following: Block | None, doc_blocks: list[Block], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if block.lang not in LANGUAGES:
        pytest.fail(f"{block.label}: language {block.lang!r} is not one of {', '.join(LANGUAGES)}")
    if block.lang == "toml":
        _check_config(block, tmp_path)
    elif block.lang == "json":
        _check_json(block, tmp_path)
    elif block.lang == "python":
        _check_python(block, tmp_path, monkeypatch)
    elif block.lang == "bash" and _is_tools_script(block):
        _check_script(block, following)
    elif block.lang == "bash":
        _check_cli(block, doc_blocks, tmp_path, monkeypatch)
