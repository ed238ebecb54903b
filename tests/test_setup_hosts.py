"""`toolshell setup HOST`: each host's file gains one entry, and nothing else changes.

Every host's written file is read back as the host documents it, and the command line it holds is
started and asked `tools/list` through the SDK client. Where the host's own CLI is on npm (Claude
Code, Codex, Gemini CLI; `tests/hosts`, installed by scripts/test.sh) the host itself reads it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tomllib
from importlib.metadata import Distribution
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from mcp import Client, StdioServerParameters

from _ci_support import skip_or_fail
from toolshell.frontends.cli import main
from toolshell.frontends.hosts import HOSTS
from toolshell.frontends.hosts.launch import launch
from toolshell.frontends.hosts.writing import BACKUP_SUFFIX

HOST_BIN = Path(__file__).parent / "hosts" / "node_modules" / ".bin"

# Another server already in each host's file, in that host's own shape.
OTHER: dict[str, Any] = {
    "json": {"command": "npx", "args": ["-y", "some-server"]},
    "vscode": {"type": "stdio", "command": "npx", "args": ["-y", "some-server"]},
    "opencode": {"type": "local", "command": ["npx", "-y", "some-server"], "enabled": True},
}
CASES = [(host, scope) for host, fmt in HOSTS.items() for scope in fmt.scopes]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home directory and a project directory (the working directory) of their own."""
    home = tmp_path / "home"
    (tmp_path / "project").mkdir()
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("APPDATA", str(home / "AppData"))
    for name in ("CLAUDE_CONFIG_DIR", "CODEX_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path / "project")
    return home


def setup(*args: str) -> Any:
    return CliRunner().invoke(main, ["setup", *args], catch_exceptions=False)


def host_file(host: str, scope: str, home: Path) -> Path:
    return HOSTS[host].scopes[scope](Path.cwd(), home, os.environ)


def write_other(host: str, path: Path) -> str:
    """Put the host's file in place with one other server and a setting of the host's own."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fmt = HOSTS[host]
    if fmt.kind == "toml":
        text = '# my settings\nmodel = "o3"  # the model\n\n[mcp_servers.other]\ncommand = "npx"\nargs = ["-y", "x"]\n'
    else:
        other = OTHER.get(host, OTHER["json"])
        text = json.dumps({"theme": "dark", fmt.key: {"other": other}, "zzz": 1}, indent=4) + "\n"
    path.write_text(text)
    return text


def entry_of(host: str, path: Path) -> tuple[str, list[str], dict[str, Any]]:
    """The toolshell entry as the host documents its file: (command, args, the whole file)."""
    fmt = HOSTS[host]
    doc = tomllib.loads(path.read_text()) if fmt.kind == "toml" else json.loads(path.read_text())
    entry = doc[fmt.key]["toolshell"]
    if host == "opencode":
        assert entry["type"] == "local" and entry["enabled"] is True
        return entry["command"][0], entry["command"][1:], doc
    if host in ("vscode", "claude-code"):
        assert entry["type"] == "stdio"
    return entry["command"], entry["args"], doc


@pytest.mark.parametrize(("host", "scope"), CASES)
def test_setup_adds_one_entry_after_the_others_keeps_a_backup_and_changes_nothing_the_second_time(
    host: str, scope: str, home: Path
) -> None:
    path = host_file(host, scope, home)
    before = write_other(host, path)
    first = setup(host, "--scope", scope)
    assert first.exit_code == 0, first.output
    assert f"added 'toolshell' in {path}" in first.output
    assert Path(str(path) + BACKUP_SUFFIX).read_text() == before
    written = path.read_text()
    command, args, doc = entry_of(host, path)
    assert [command, *args[:1]] == [shutil.which("toolshell") or command, "serve"] and Path(command).is_absolute()
    assert args[1:] == ["--state-dir", os.environ["TOOLSHELL_STATE_DIR"]]
    servers = doc[HOSTS[host].key]
    assert list(servers) == ["other", "toolshell"]
    if HOSTS[host].kind == "toml":
        assert written.startswith(before) and "# the model" in written  # comments and layout kept
    else:
        assert list(doc) == ["theme", HOSTS[host].key, "zzz"] and '\n    "theme"' in written  # order, indent
        assert servers["other"] == OTHER.get(host, OTHER["json"])
    again = setup(host, "--scope", scope)
    assert again.exit_code == 0 and "runs toolshell already" in again.output
    assert path.read_text() == written


@pytest.mark.parametrize("host", list(HOSTS))
def test_each_hosts_entry_starts_toolshell_serve_which_answers_tools_list(host: str, home: Path) -> None:
    assert setup(host).exit_code == 0
    command, args, _ = entry_of(host, host_file(host, "user", home))

    async def listed() -> list[str]:
        with anyio.fail_after(60):
            async with Client(StdioServerParameters(command=command, args=args, env=dict(os.environ))) as client:
                return [t.name for t in (await client.list_tools()).tools]

    assert anyio.run(listed) == ["bash"]


def test_print_shows_the_entry_and_its_file_and_writes_nothing(home: Path) -> None:
    shown = CliRunner().invoke(main, ["setup", "codex", "--print"])
    assert shown.exit_code == 0
    assert f"# Codex, user: {home / '.codex' / 'config.toml'}" in shown.stderr
    entry = tomllib.loads(shown.stdout)["mcp_servers"]["toolshell"]
    assert entry["args"][0] == "serve" and Path(entry["command"]).is_absolute()
    assert not (home / ".codex").exists()


def test_a_stale_entry_is_replaced_where_it_was(home: Path) -> None:
    path = home / ".cursor" / "mcp.json"
    path.parent.mkdir()
    stale = {"command": "/old/toolshell", "args": ["serve"]}
    path.write_text(json.dumps({"mcpServers": {"a": {"command": "a"}, "toolshell": stale, "b": {"command": "b"}}}))
    result = setup("cursor")
    assert result.exit_code == 0 and "updated 'toolshell'" in result.output
    servers = json.loads(path.read_text())["mcpServers"]
    assert list(servers) == ["a", "toolshell", "b"] and servers["toolshell"]["command"] != "/old/toolshell"


@pytest.mark.parametrize(
    ("host", "text", "said"),
    [
        ("cursor", '{"mcpServers": {"a": {"command": "a"},}}', "is not valid JSON at line 1"),
        ("vscode", '{\n  // mine\n  "servers": {}\n}', "comments are not JSON"),
        ("gemini", '["not", "an", "object"]', "does not hold a JSON object"),
        ("claude-code", '{"mcpServers": ["a"]}', "`mcpServers` is not an object of servers"),
        ("codex", "[mcp_servers.a\ncommand = 1\n", "is not valid TOML"),
    ],
)
def test_a_file_that_does_not_parse_is_refused_and_left_as_it_was(host: str, text: str, said: str, home: Path) -> None:
    path = host_file(host, "user", home)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    result = CliRunner().invoke(main, ["setup", host])
    assert result.exit_code == 1
    assert said in result.output and "Traceback" not in result.output
    assert path.read_text() == text and not Path(str(path) + BACKUP_SUFFIX).exists()


def test_a_symlinked_file_is_refused_until_named_then_written_through_the_link_with_its_mode(
    home: Path, tmp_path: Path
) -> None:
    real = tmp_path / "dotfiles" / "claude.json"
    real.parent.mkdir()
    real.write_text('{"numStartups": 3}')
    real.chmod(0o600)
    (home / ".claude.json").symlink_to(real)
    refused = setup("claude-code")
    assert refused.exit_code == 1 and f"run this again with --follow-link {real}" in refused.output
    assert real.read_text() == '{"numStartups": 3}'
    assert setup("claude-code", "--follow-link", str(real)).exit_code == 0
    assert (home / ".claude.json").is_symlink()
    assert list(json.loads(real.read_text())) == ["numStartups", "mcpServers"]
    assert real.stat().st_mode & 0o777 == 0o600
    assert Path(str(real) + BACKUP_SUFFIX).read_text() == '{"numStartups": 3}'


def test_the_config_in_use_is_named_and_a_configured_state_dir_is_left_to_it(home: Path, tmp_path: Path) -> None:
    config = tmp_path / "mine.toml"
    config.write_text(f'[state]\ndir = "{tmp_path / "kept"}"\n')
    assert setup("gemini", "--config", str(config)).exit_code == 0
    _, args, _ = entry_of("gemini", home / ".gemini" / "settings.json")
    assert args == ["serve", "--config", str(config)]


def test_a_broken_toolshell_config_is_refused_before_any_host_file_is_touched(home: Path, tmp_path: Path) -> None:
    config = tmp_path / "broken.toml"
    config.write_text("[[mcp.servers]]\nname = 1\n")
    result = CliRunner().invoke(main, ["setup", "cursor", "--config", str(config)])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert not (home / ".cursor").exists()


def test_a_host_without_a_project_file_says_which_scope_it_has(home: Path) -> None:
    result = CliRunner().invoke(main, ["setup", "claude-desktop", "--scope", "project"])
    assert result.exit_code == 2 and "Claude Desktop has a user file only" in result.output


@pytest.mark.parametrize("name", ["", "a b", "x\ny", "ü" * 3])
def test_a_server_name_a_host_could_misread_is_refused(name: str, home: Path) -> None:
    result = CliRunner().invoke(main, ["setup", "cursor", "--name", name])
    assert result.exit_code == 2 and "use letters, digits" in result.output
    assert not (home / ".cursor").exists()


def _uv_cache(tmp_path: Path, direct_url: dict[str, Any] | None) -> tuple[Path, Path, Distribution, Path]:
    """toolshell as `uvx` leaves it in uv's cache: its prefix, a `uvx` on PATH, its distribution
    (with `direct_url.json` when it came from a path or URL, as pip and uv write it), the cache."""
    cache = tmp_path / "cache" / "uv"
    prefix = cache / "archive-v0" / "abc"
    info = prefix / "lib" / "python3.11" / "site-packages" / "toolshell-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.4\nName: toolshell\nVersion: 0.1.0\n")
    if direct_url is not None:
        (info / "direct_url.json").write_text(json.dumps(direct_url))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "uvx").write_text("#!/bin/sh\n")
    (bin_dir / "uvx").chmod(0o755)
    return prefix, bin_dir, Distribution.at(info), cache


def test_toolshell_from_a_package_index_run_from_uvs_cache_is_written_as_uvx(tmp_path: Path) -> None:
    prefix, bin_dir, dist, cache = _uv_cache(tmp_path, None)
    found = launch(["serve"], prefix=str(prefix), env={"UV_CACHE_DIR": str(cache), "PATH": str(bin_dir)}, dist=dist)
    assert (found.command, found.args, found.installed) == (str(bin_dir / "uvx"), ["toolshell", "serve"], "uvx")


@pytest.mark.parametrize(
    ("direct_url", "source"),
    [
        (
            {"url": "file:///tmp/dist/toolshell-0.1.0-py3-none-any.whl", "archive_info": {}},
            "/tmp/dist/toolshell-0.1.0-py3-none-any.whl",
        ),
        ({"url": "file:///home/me/toolshell", "dir_info": {}}, "/home/me/toolshell"),
        (
            {"url": "https://example.org/toolshell.git", "vcs_info": {"vcs": "git", "commit_id": "3f9c0e1"}},
            "git+https://example.org/toolshell.git@3f9c0e1",
        ),
    ],
)
def test_toolshell_run_by_uvx_from_a_wheel_or_checkout_is_written_as_uvx_from_it_since_no_release_is_published(
    direct_url: dict[str, Any], source: str, tmp_path: Path
) -> None:
    prefix, bin_dir, dist, cache = _uv_cache(tmp_path, direct_url)
    found = launch(["serve"], prefix=str(prefix), env={"UV_CACHE_DIR": str(cache), "PATH": str(bin_dir)}, dist=dist)
    assert found.argv == [str(bin_dir / "uvx"), "--from", source, "toolshell", "serve"]


def test_a_pipx_install_is_written_as_its_stable_link(tmp_path: Path) -> None:
    venv = tmp_path / "pipx" / "venvs" / "toolshell"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "toolshell").write_text("#!/bin/sh\n")
    (venv / "bin" / "toolshell").chmod(0o755)
    links = tmp_path / "local-bin"
    links.mkdir()
    (links / "toolshell").symlink_to(venv / "bin" / "toolshell")
    env = {"PIPX_HOME": str(tmp_path / "pipx"), "PATH": str(links), "UV_CACHE_DIR": str(tmp_path / "uv")}
    found = launch(["serve"], prefix=str(venv), env=env)
    assert (found.command, found.installed) == (str(links / "toolshell"), "pipx")


# --- the hosts themselves read the file -------------------------------------------------------


def _host_cli(name: str) -> Path:
    exe = HOST_BIN / name
    if not exe.exists():
        skip_or_fail(f"{name} is not installed at {exe} (npm install --prefix tests/hosts; scripts/test.sh does)")
    return exe


def _run_host(exe: Path, *args: str, home: Path, stdout_only: bool = False) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("CLAUDE_CONFIG_DIR", "CODEX_HOME")}
    env.update(HOME=str(home), DISABLE_AUTOUPDATER="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", NO_COLOR="1")
    done = subprocess.run([str(exe), *args], env=env, capture_output=True, text=True, timeout=180)
    return done.stdout if stdout_only else done.stdout + done.stderr


@pytest.mark.real
@pytest.mark.parametrize("scope", ["user", "project"])
def test_claude_code_connects_to_the_server_setup_wrote(scope: str, home: Path) -> None:
    exe = _host_cli("claude")
    assert setup("claude-code", "--scope", scope).exit_code == 0
    if scope == "project":  # the approval Claude Code asks for on start, given up front
        (home / ".claude").mkdir()
        (home / ".claude" / "settings.json").write_text('{"enabledMcpjsonServers": ["toolshell"]}')
    listed = _run_host(exe, "mcp", "list", home=home)
    assert "toolshell: " in listed and "serve --state-dir" in listed
    assert "✔ Connected" in listed, listed


@pytest.mark.real
def test_codex_reads_the_server_setup_wrote_beside_its_own(home: Path) -> None:
    exe = _host_cli("codex")
    write_other("codex", home / ".codex" / "config.toml")
    assert setup("codex").exit_code == 0
    listed = _run_host(exe, "mcp", "list", "--json", home=home, stdout_only=True)
    servers = {s["name"]: s for s in json.loads(listed)}
    assert list(servers) == ["other", "toolshell"]
    transport = servers["toolshell"]["transport"]
    assert transport["type"] == "stdio" and transport["args"][0] == "serve"
    assert Path(transport["command"]).is_absolute() and servers["toolshell"]["enabled"] is True


@pytest.mark.real
def test_gemini_cli_connects_to_the_server_setup_wrote(home: Path) -> None:
    exe = _host_cli("gemini")
    assert setup("gemini").exit_code == 0
    (home / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(Path.cwd()): "TRUST_FOLDER"}))
    listed = _run_host(exe, "mcp", "list", home=home)
    assert "toolshell: " in listed and "- Connected" in listed, listed


# Gemini CLI's folder trust (issue 30, item 12): `setup gemini` says whether Gemini CLI will start
# the server in this folder, judged as Gemini CLI judges it, and how to trust one.
TRUST_CASES = {
    "no rule": lambda cwd: {},
    "the folder trusted": lambda cwd: {str(cwd): "TRUST_FOLDER"},
    "a child's parent trusted": lambda cwd: {str(cwd / "sub"): "TRUST_PARENT"},
    "distrusted under a trusted parent": lambda cwd: {str(cwd.parent): "TRUST_FOLDER", str(cwd): "DO_NOT_TRUST"},
    "another folder trusted": lambda cwd: {str(cwd.parent / "other"): "TRUST_FOLDER"},
}


@pytest.mark.real
@pytest.mark.parametrize("case", list(TRUST_CASES))
def test_setup_gemini_says_whether_gemini_cli_will_start_it_here_as_gemini_cli_itself_judges(
    case: str, home: Path
) -> None:
    exe = _host_cli("gemini")
    (home / ".gemini").mkdir()
    (home / ".gemini" / "trustedFolders.json").write_text(json.dumps(TRUST_CASES[case](Path.cwd())))
    result = setup("gemini")
    assert result.exit_code == 0
    listed = _run_host(exe, "mcp", "list", home=home)
    assert "toolshell: " in listed, listed
    if "does not trust" in result.output:
        assert f"Gemini CLI does not trust {Path.cwd()} yet, so it will not start the server there." in result.output
        assert "disabled because this folder is untrusted" in listed and "- Disabled" in listed
    else:
        assert f"Gemini CLI trusts {Path.cwd()}, so it starts the server there." in result.output
        # started (whether it connects in time on a loaded machine is the test above's)
        assert "untrusted" not in listed and "- Disabled" not in listed, listed
    assert "/permissions trust" in result.output and "Trust folder" in result.output


def test_setup_gemini_with_folder_trust_turned_off_says_it_starts_everywhere(home: Path) -> None:
    (home / ".gemini").mkdir()
    (home / ".gemini" / "settings.json").write_text('{"security": {"folderTrust": {"enabled": false}}}')
    result = setup("gemini")
    assert result.exit_code == 0 and "folder trust is off" in result.output
