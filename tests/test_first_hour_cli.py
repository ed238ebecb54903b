"""What a new user meets in the first hour at the command line: trusting a checkout's config shows
what it starts, `toolshell run` keeps the script's output order, the README's built-in server runs
from its own folder, and the smaller CLI fixes (issue: the first hour)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from _cli_support import CLI, SRC, on_a_terminal, toolshell
from toolshell.config import load_file

CHECKOUT = """\
[[mcp.servers]]
name = "tool"
command = "tool-server"
args = ["--root", "my dir", "\\u001b[2J"]
env = { API_TOKEN = "sk-literal-secret-1234", LEVEL = "debug", GH = "${GITHUB_TOKEN}" }
load = "on_demand"

[[mcp.servers]]
name = "docs"
type = "http"
url = "https://user:hunter22@docs.example/mcp?key=abcdef123"
headers = { Authorization = "Bearer ${DOCS_TOKEN}" }
load = "on_demand"
"""


def _env(tmp_path: Path) -> dict[str, str]:
    return {"TOOLSHELL_STATE_DIR": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}


def _checkout(tmp_path: Path, text: str = CHECKOUT) -> Path:
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "toolshell.toml").write_text(text)
    return checkout


# --- item 2: trusting shows what it trusts ----------------------------------------------------


def test_trust_prints_each_servers_exact_command_and_url_escaped_with_literal_secrets_masked(tmp_path: Path) -> None:
    checkout = _checkout(tmp_path)
    trusted = toolshell("config", "trust", "--yes", cwd=checkout, env=_env(tmp_path))
    assert trusted.returncode == 0, trusted.stderr
    lines = trusted.stdout.splitlines()
    assert lines[0] == f"{checkout.resolve() / 'toolshell.toml'} would start:"
    assert lines[1:7] == [
        "  server tool: runs tool-server --root 'my dir' '\\x1b[2J'",
        "    env API_TOKEN=***",
        "    env LEVEL=debug",
        "    env GH=${GITHUB_TOKEN}",
        "  server docs: connects to https://user:***@docs.example/mcp?key=***",
        "    header Authorization: Bearer ${DOCS_TOKEN}",
    ]
    assert lines[-1].startswith("trusted ")
    everything = trusted.stdout + trusted.stderr
    assert "sk-literal" not in everything and "hunter22" not in everything and "abcdef123" not in everything
    assert "\x1b" not in everything


def test_trust_without_a_terminal_or_yes_prints_what_it_would_trust_and_refuses_naming_the_flag(
    tmp_path: Path,
) -> None:
    checkout = _checkout(tmp_path)
    refused = toolshell("config", "trust", cwd=checkout, env=_env(tmp_path))
    assert refused.returncode == 1
    assert "server tool: runs tool-server" in refused.stdout
    fix = "to trust it, run `toolshell config trust toolshell.toml --yes`"
    assert f"not trusted: there is no terminal to ask on; {fix}" in refused.stderr
    still = toolshell("servers", "--json", cwd=checkout, env=_env(tmp_path))
    assert "ignoring toolshell.toml in the working directory (it is not trusted" in still.stderr


def test_trusting_again_after_an_edit_shows_only_what_changed_since_the_last_trust(tmp_path: Path) -> None:
    checkout = _checkout(tmp_path)
    assert toolshell("config", "trust", "--yes", cwd=checkout, env=_env(tmp_path)).returncode == 0
    (checkout / "toolshell.toml").write_text(CHECKOUT.replace('"--root", "my dir"', '"--root", "/"'))
    again = toolshell("config", "trust", "--yes", cwd=checkout, env=_env(tmp_path))
    assert again.returncode == 0, again.stderr
    shown = again.stdout.splitlines()
    assert shown[0].endswith("toolshell.toml changed since it was trusted; what it starts, then (-) and now (+):")
    assert "  -server tool: runs tool-server --root 'my dir' '\\x1b[2J'" in shown
    assert "  +server tool: runs tool-server --root / '\\x1b[2J'" in shown
    assert not any("docs" in line for line in shown)  # unchanged lines beyond the context stay out
    used = toolshell("servers", "--json", cwd=checkout, env=_env(tmp_path))
    assert "ignoring" not in used.stderr
    same = toolshell("config", "trust", cwd=checkout, env=_env(tmp_path))  # no --yes needed: nothing new
    file = checkout.resolve() / "toolshell.toml"
    assert (same.returncode, same.stdout) == (0, f"{file} is trusted already, as it is now\n")


def _on_a_terminal(
    args: list[str], cwd: Path, env: dict[str, str], answer: bytes, meanwhile: Callable[[], None] = lambda: None
) -> tuple[int, str]:
    """`toolshell ARGS` on a pseudo-terminal; `answer` is typed at the trust prompt, after `meanwhile` ran."""
    return on_a_terminal([*CLI, *args], cwd, env, answer, b"Trust it? [y/N]", meanwhile)


def test_trust_on_a_terminal_asks_first_and_records_only_a_yes(tmp_path: Path) -> None:
    checkout = _checkout(tmp_path)
    code, seen = _on_a_terminal(["config", "trust"], checkout, _env(tmp_path), b"n\n")
    assert code == 1 and "server tool: runs tool-server" in seen and "not trusted" in seen
    assert "ignoring" in toolshell("servers", "--json", cwd=checkout, env=_env(tmp_path)).stderr
    code, seen = _on_a_terminal(["config", "trust"], checkout, _env(tmp_path), b"y\n")
    assert code == 0 and "trusted " in seen
    assert "ignoring" not in toolshell("servers", "--json", cwd=checkout, env=_env(tmp_path)).stderr


def test_a_file_edited_while_the_prompt_waits_is_not_trusted_by_the_yes(tmp_path: Path) -> None:
    checkout = _checkout(tmp_path)

    def edit() -> None:
        (checkout / "toolshell.toml").write_text(CHECKOUT.replace("tool-server", "other-server"))

    code, seen = _on_a_terminal(["config", "trust"], checkout, _env(tmp_path), b"y\n", meanwhile=edit)
    assert code == 0 and "runs tool-server" in seen and "other-server" not in seen
    used = toolshell("servers", "--json", cwd=checkout, env=_env(tmp_path))
    assert "ignoring toolshell.toml in the working directory (it changed since it was trusted)" in used.stderr


# --- item 4: output order ------------------------------------------------------------------------


def test_run_writes_stdout_and_stderr_in_script_order_into_one_pipe(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from toolshell.frontends.cli import main; main()",
            "run",
            "-c",
            "echo one; tools nosuch; echo two; echo three >&2; echo four",
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": SRC, **_env(tmp_path)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=60,
    )
    lines = done.stdout.decode().splitlines()
    assert [line if not line.startswith("{") else "error" for line in lines] == [
        "one",
        "error",
        "two",
        "three",
        "four",
    ]
    assert '"code":"unknown_command"' in lines[1]


def test_run_with_json_still_gives_one_object_with_the_whole_output(tmp_path: Path) -> None:
    ran = toolshell("run", "--json", "-c", "echo one; echo two >&2", cwd=tmp_path, env=_env(tmp_path))
    assert ran.returncode == 0 and ran.stderr == ""
    assert '"stdout": "one\\n"' in ran.stdout and '"stderr": "two\\n"' in ran.stdout


# --- item 6: the README's built-in server, run from its own folder -------------------------------


README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def _block(text: str, lang: str) -> str:
    """The first fenced `lang` block of `text`."""
    return text.split(f"```{lang}\n", 1)[1].split("```", 1)[0]


def _console(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`toolshell ARGS` as the installed console script runs: the working directory is not on the
    import path (`python -c` would put it there; `-P` keeps it off)."""
    return subprocess.run(
        [sys.executable, "-P", "-c", "from toolshell.frontends.cli import main; main()", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": SRC, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_readmes_built_in_server_runs_as_written_from_the_folder_of_its_trusted_config(tmp_path: Path) -> None:
    (tmp_path / "my_package").mkdir()
    section = README.split("## Writing a built-in server", 1)[1]
    (tmp_path / "my_package" / "words.py").write_text(_block(section, "python"))
    (tmp_path / "toolshell.toml").write_text(_block(section, "toml"))
    env = _env(tmp_path)
    assert _console("config", "trust", "--yes", cwd=tmp_path, env=env).returncode == 0
    ran = _console("run", "-c", 'tools words word-count text="a b c"', cwd=tmp_path, env=env)
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "3\n", "")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    by_path = _console(
        "run",
        "--config",
        str(tmp_path / "toolshell.toml"),
        "-c",
        "tools words word-count text=x",
        cwd=elsewhere,
        env=env,
    )
    assert (by_path.returncode, by_path.stdout) == (0, "1\n"), by_path.stderr


# --- item 10: saved scripts at the command line ----------------------------------------------------

SCHEMA = '{"type":"object","properties":{"text":{"type":"string","description":"what to echo"}},"required":["text"]}'


def test_scripts_save_and_delete_at_the_command_line_need_no_manage_scripts(tmp_path: Path) -> None:
    env = _env(tmp_path)  # the embedded default: manage_scripts is off
    saved = toolshell(
        "scripts", "save", "echoer", "--description", "Echo the text.", "--input-schema", SCHEMA,
        cwd=tmp_path, env=env, stdin="jq -r .text\n",
    )  # fmt: skip
    assert (saved.returncode, saved.stdout, saved.stderr) == (0, "saved script echoer\n", "")
    ran = toolshell("scripts", "echoer", "text=hi", cwd=tmp_path, env=env)
    assert (ran.returncode, ran.stdout) == (0, "hi\n")
    agent = toolshell("run", "-c", "echo 'echo x' | tools scripts save other", cwd=tmp_path, env=env)
    assert (
        agent.returncode == 1 and "saving scripts needs manage_scripts = true" in agent.stderr
    )  # a script still may not
    deleted = toolshell("scripts", "delete", "echoer", cwd=tmp_path, env=env)
    assert (deleted.returncode, deleted.stdout) == (0, "deleted script echoer\n")
    assert "no saved scripts yet" in toolshell("scripts", cwd=tmp_path, env=env).stdout


def test_scripts_save_of_a_script_that_does_not_parse_saves_nothing_and_says_so(tmp_path: Path) -> None:
    env = _env(tmp_path)
    bad = toolshell("scripts", "save", "bad", cwd=tmp_path, env=env, stdin="if then\n")
    assert bad.returncode == 1 and "the script does not parse" in bad.stderr and "nothing was saved" in bad.stderr
    assert "Traceback" not in bad.stderr
    assert "no saved scripts yet" in toolshell("scripts", cwd=tmp_path, env=env).stdout


def test_scripts_name_help_shows_the_scripts_description_and_input_schema(tmp_path: Path) -> None:
    env = _env(tmp_path)
    saving = ("scripts", "save", "echoer", "--description", "Echo the text.", "--input-schema", SCHEMA)
    assert toolshell(*saving, cwd=tmp_path, env=env, stdin="jq -r .text\n").returncode == 0
    helped = toolshell("scripts", "echoer", "--help", cwd=tmp_path, env=env)
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.splitlines()[:5] == [
        "tools scripts echoer",
        "  Echo the text.",
        "",
        "input (key=value, --key value, '{json}' or - for stdin; * = required):",
        "  text*: string — what to echo",
    ]
    assert toolshell("scripts", "--help", cwd=tmp_path, env=env).stdout.startswith("Usage: ")


# --- item 10: config validate and config import ----------------------------------------------------


def test_config_validate_warns_about_a_stdio_command_that_is_not_found_and_still_exits_0(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(
        '[[mcp.servers]]\nname = "gone"\ncommand = "/nonexistent/bin/server"\n\n'
        '[[mcp.servers]]\nname = "unknown"\ncommand = "no-such-mcp-server-xyz"\n\n'
        f'[[mcp.servers]]\nname = "here"\ncommand = "{sys.executable}"\n\n'
        '[[mcp.servers]]\nname = "off"\ncommand = "/nonexistent/too"\nenabled = false\n'
    )
    checked = toolshell("config", "validate", str(config), cwd=tmp_path, env=_env(tmp_path))
    assert checked.returncode == 0
    assert checked.stdout == f"{config}: ok (4 servers: gone, unknown, here, off)\n"
    assert checked.stderr.splitlines() == [
        '  warning: mcp.servers[gone].command: "/nonexistent/bin/server" does not exist; install it or fix the path',
        '  warning: mcp.servers[unknown].command: "no-such-mcp-server-xyz" is not found on PATH; '
        "install it, or write its full path",
    ]


def test_config_import_of_a_toml_file_keeps_every_section_so_the_result_means_the_same(tmp_path: Path) -> None:
    reference = (Path(__file__).resolve().parents[1] / "docs" / "configuration.md").read_text()
    complete = reference.split("## A complete file", 1)[1].split("```toml\n", 1)[1].split("```", 1)[0]
    assert "[tools_in_shell]" in complete and "[web_fetch]" in complete
    original = tmp_path / "toolshell.toml"
    original.write_text(complete)
    imported = toolshell("config", "import", str(original), cwd=tmp_path, env=_env(tmp_path))
    assert imported.returncode == 0 and imported.stderr == "", imported.stderr
    assert "[tools_in_shell]" in imported.stdout and "[web_fetch]" in imported.stdout
    converted = tmp_path / "converted.toml"
    converted.write_text(imported.stdout)
    assert load_file(converted, expand=False).model_dump() == load_file(original, expand=False).model_dump()


# --- item 10: launchers pass the config and state through the environment ------------------------


@pytest.mark.anyio
async def test_the_readmes_launcher_entry_starts_serve_with_the_config_and_state_of_its_env(tmp_path: Path) -> None:
    shown = next(b for b in README.split("```json\n")[1:] if "TOOLSHELL_CONFIG" in b.split("```", 1)[0])
    entry = json.loads(shown.split("```", 1)[0])["mcpServers"]["toolshell"]
    assert entry["command"] == "toolshell" and set(entry["env"]) == {"TOOLSHELL_CONFIG", "TOOLSHELL_STATE_DIR"}
    config = tmp_path / "project" / "toolshell.toml"
    config.parent.mkdir()
    config.write_text('include_builtins = false\n\n[[mcp.servers]]\nname = "text_metrics"\ntype = "builtin"\n')
    state = tmp_path / "state"
    here = {"TOOLSHELL_CONFIG": str(config), "TOOLSHELL_STATE_DIR": str(state)}  # the entry's, for this machine
    params = StdioServerParameters(
        command=sys.executable,  # `toolshell`, from this checkout
        args=["-P", "-c", "from toolshell.frontends.cli import main; main()", *entry["args"]],
        env={**{k: here[k] for k in entry["env"]}, "PYTHONPATH": SRC, "HOME": str(tmp_path)},
        cwd=str(tmp_path),
    )
    with anyio.fail_after(60):
        async with Client(params) as client:
            listed = await client.call_tool("bash", {"script": "tools --help"})
    stdout = listed.structured_content["stdout"]
    assert "text_metrics" in stdout.replace("-", "_") and "runtime" not in stdout
    assert (state / "toolshell.db").is_file()


def test_streamed_output_has_the_configs_secrets_masked_on_both_streams(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(
        '[[mcp.servers]]\nname = "s"\ncommand = "some-server"\nload = "on_demand"\n'
        'env = { API_TOKEN = "${FIRST_HOUR_TOKEN}" }\n'
    )
    secret = "tok-4f9a1c7e2b"
    ran = toolshell(
        "run", "--config", str(config), "-c", f"echo {secret}; echo {secret} >&2",
        cwd=tmp_path, env={**_env(tmp_path), "FIRST_HOUR_TOKEN": secret},
    )  # fmt: skip
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "***\n", "***\n")
