"""The `toolshell` command line: run, plan, config validate/import, approvals, timeline, servers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from toolshell.frontends.cli import main

BROKEN = {
    "no_command.toml": (
        '[[mcp.servers]]\nname = "git"\ntype = "stdio"\n',
        "mcp.servers[git]: a stdio server needs `command`, e.g. command = \"npx\" (server 'git')",
    ),
    "bad_url.toml": (
        '[[mcp.servers]]\nname = "web"\ntype = "http"\nurl = "ftp://example"\n',
        "mcp.servers[web]: url 'ftp://example' must start with http:// or https://",
    ),
    "unset_var.toml": (
        '[[mcp.servers]]\nname = "gh"\ncommand = "npx"\nargs = ["${TOOLSHELL_TEST_UNSET}"]\n',
        "mcp.servers[gh].args: ${TOOLSHELL_TEST_UNSET} is not set; export TOOLSHELL_TEST_UNSET=… "
        "or write ${TOOLSHELL_TEST_UNSET:-default}",
    ),
    "typo.toml": (
        '[[mcp.servers]]\nname = "a"\ncommand = "x"\nlod = "startup"\n',
        "mcp.servers[a].lod: unknown key `lod`; did you mean `load`?",
    ),
    "bad_mode.toml": (
        '[approval]\nmode = "sometimes"\n',
        "approval.mode: must be 'off', 'normal' or 'strict' (you wrote 'sometimes')",
    ),
    "twice.toml": (
        '[[mcp.servers]]\nname = "a"\ncommand = "x"\n[[mcp.servers]]\nname = "a"\ncommand = "y"\n',
        "mcp: server name 'a' is used twice; give each [[mcp.servers]] its own name",
    ),
    "pattern.toml": (
        '[[mcp.servers]]\nname = "a"\ncommand = "x"\ntools = ["list*_x"]\n',
        "mcp.servers[a].tools: tool pattern 'list*_x' has a '*' before its end; only a trailing '*' is allowed",
    ),
    "role_ref.toml": (
        '[[roles]]\nname = "dev"\n[roles.mcp]\nserver_refs = ["nope"]\n',
        "roles[dev].mcp.server_refs: role 'dev' refers to server 'nope', which no [[mcp.servers]] declares; "
        "add a [[mcp.servers]] entry named 'nope' or remove the reference",
    ),
    "bad.json": ('{"mcpServers": {"x": 3}}', "mcpServers.x: must be an object with `command` or `url`"),
    "not_toml.toml": ("[[mcp.servers\nname=1", "not valid TOML"),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_config_validate_prints_a_located_actionable_message_and_exits_2(tmp_path: Path, name: str) -> None:
    text, expected = BROKEN[name]
    path = tmp_path / name
    path.write_text(text)
    result = CliRunner().invoke(main, ["config", "validate", str(path)])
    assert result.exit_code == 2
    assert result.output.startswith(f"config error in {path}:\n")
    assert expected in result.output
    assert "Traceback" not in result.output


def test_config_validate_accepts_a_good_file(tmp_path: Path) -> None:
    path = tmp_path / "ok.toml"
    path.write_text('[[mcp.servers]]\nname = "time"\ncommand = "mcp-server-time"\nload = "on_demand"\n')
    result = CliRunner().invoke(main, ["config", "validate", str(path)])
    assert (result.exit_code, result.output) == (0, f"{path}: ok (1 servers: time)\n")


def test_config_import_converts_another_hosts_json_to_toml(tmp_path: Path) -> None:
    path = tmp_path / "claude.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "git": {"command": "uvx", "args": ["mcp-server-git"], "env": {"A": "1"}},
                    "docs": {"url": "http://127.0.0.1:9000/mcp", "headers": {"X": "y"}},
                }
            }
        )
    )
    result = CliRunner().invoke(main, ["config", "import", str(path)])
    assert result.exit_code == 0, result.output
    assert result.output == (
        '[[mcp.servers]]\nname = "git"\ntype = "stdio"\ncommand = "uvx"\nargs = ["mcp-server-git"]\n'
        'env = { "A" = "1" }\n\n'
        '[[mcp.servers]]\nname = "docs"\ntype = "http"\nurl = "http://127.0.0.1:9000/mcp"\n'
        'headers = { "X" = "y" }\n'
    )
    converted = tmp_path / "converted.toml"
    converted.write_text(result.output)
    assert CliRunner().invoke(main, ["config", "validate", str(converted)]).exit_code == 0


def test_run_passes_output_and_exit_code_through() -> None:
    result = CliRunner().invoke(main, ["run", "-c", "tools text-metrics text-length text=héllo; exit 4"])
    assert (result.exit_code, result.stdout) == (4, "5\n")


def test_run_json_prints_one_object_with_the_report(tmp_path: Path) -> None:
    script = tmp_path / "s.sh"
    script.write_text('tools text_metrics text_length \'{"text": "abc"}\'\n')
    result = CliRunner().invoke(main, ["run", "--json", str(script)])
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {
        "exit_code": 0,
        "success": True,
        "stdout": "3\n",
        "stderr": "",
        "hints": ["text_metrics: Use text_length when you need a Unicode scalar count of supplied text."],
    }


def test_run_reads_the_script_from_stdin() -> None:
    result = CliRunner().invoke(main, ["run", "-"], input="echo from-stdin\n")
    assert result.stdout == "from-stdin\n"


def test_plan_prints_the_calls_with_risk() -> None:
    result = CliRunner().invoke(main, ["plan", "-c", "tools text-metrics text-length text=x"])
    assert json.loads(result.stdout) == {
        "calls": [
            {"tool": "tools text-metrics text-length", "input": {"text": "x"}, "risk": "read_only", "where": "script"}
        ],
        "complete": True,
    }


def test_approvals_list_grant_and_the_timeline_work_across_processes(tmp_path: Path) -> None:
    state = tmp_path / "st"
    config = tmp_path / "strict.toml"
    config.write_text('[approval]\nmode = "strict"\n')
    runner = CliRunner()
    script = "tools runtime mcp action=disable server=text_metrics"
    stopped = runner.invoke(main, ["run", "--config", str(config), "--state-dir", str(state), "--json", "-c", script])
    report = json.loads(stopped.stdout)
    assert report["tools"]["stopped"]["before_start"] is True
    listed = runner.invoke(main, ["approvals", "--state-dir", str(state), "list"])
    request_id = listed.stdout.split()[0]
    granted = runner.invoke(main, ["approvals", "--state-dir", str(state), "grant", request_id])
    assert granted.stdout == (
        f'granted {request_id} (once): tools runtime mcp {{"action": "disable", "server": "text_metrics"}} (mutating)\n'
    )
    again = runner.invoke(main, ["run", "--config", str(config), "--state-dir", str(state), "-c", script])
    assert again.exit_code == 0, again.output
    timeline = runner.invoke(main, ["timeline", "--state-dir", str(state)])
    assert timeline.stdout.count("tools runtime mcp") >= 2


def test_servers_lists_every_server_as_json() -> None:
    result = CliRunner().invoke(main, ["servers", "--json"])
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    assert rows["text_metrics"]["state"] == "ready"
    assert rows["text_metrics"]["tool_count"] == 1


def test_a_missing_config_file_is_a_clear_error_not_a_traceback(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["run", "--config", str(tmp_path / "nope.toml"), "-c", "true"])
    assert result.exit_code == 2
    assert "cannot read the file" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[approval]\ndeny = ["git:*x*"]\n', "approval.deny: 'git:*x*' has a '*' before the end of a name"),
        ('[approval]\nrater = "command"\n', 'approval: rater = "command" needs the program to run'),
        ('[[guard]]\ntool = ""\n', "guard[0].tool: '' names no tool"),
        (
            '[[mcp.servers]]\nname = "h"\ntype = "http"\nurl = "http://127.0.0.1:1/mcp"\ncommand = "x"\n',
            "mcp.servers[h]: `command` do(es) not apply to a http server",
        ),
        ('[[roles]]\nname = "a"\n[[roles]]\nname = "a"\n', "roles[a]: role 'a' is defined twice"),
    ],
)
def test_config_validate_catches_what_policy_and_roles_would_refuse_later(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = tmp_path / "c.toml"
    path.write_text(text)
    result = CliRunner().invoke(main, ["config", "validate", str(path)])
    assert result.exit_code == 2
    assert expected in result.output


def test_config_validate_warns_about_roles_that_allow_nothing(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        '[[mcp.servers]]\nname = "t"\ncommand = "x"\n[[roles]]\nname = "a"\n[roles.mcp]\nserver_refs = ["t"]\n'
        'allowed_tools = ["git:*"]\n'
    )
    result = CliRunner().invoke(main, ["config", "validate", str(path)])
    assert result.exit_code == 0
    assert "warning: roles: role 'a' uses server 't' but no allowed_tools entry names it" in result.output


def test_run_with_a_role_sees_only_the_roles_servers(tmp_path: Path) -> None:
    config = tmp_path / "roles.toml"
    config.write_text(
        '[[roles]]\nname = "counter"\n[roles.mcp]\nserver_refs = ["text_metrics"]\nallowed_tools = ["text_metrics:*"]\n'
    )
    script = "tools --help | grep -c runtime || true; tools text-metrics text-length text=abc"
    result = CliRunner().invoke(main, ["run", "--config", str(config), "--role", "counter", "-c", script])
    assert result.stdout == "0\n3\n"


def test_scripts_are_saved_listed_and_run_from_the_command_line(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[tools_in_shell]\nmanage_scripts = true\n")
    base = ["scripts", "--config", str(config), "--state-dir", str(tmp_path / "st")]
    runner = CliRunner()
    body = 'tools text-metrics text-length text="$(jq -r .text)"\n'
    schema = '{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}'
    saved = runner.invoke(
        main, [*base, "save", "count", "--description", "Count.", "--input-schema", schema], input=body
    )
    listed = runner.invoke(main, base)
    ran = runner.invoke(main, [*base, "count", "text=héllo"])
    assert saved.stdout == "saved script count\n", saved.output
    assert "count" in listed.stdout and "Count." in listed.stdout
    assert (ran.exit_code, ran.stdout) == (0, "5\n")
