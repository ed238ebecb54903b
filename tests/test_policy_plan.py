"""`tools plan`: every `tools` call a script makes that can be read without running it."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from toolshell.config import Config
from toolshell.policy import Policy, Risk, ScannedCall, plan_json, plan_json_async, scan
from toolshell.policy import plan as plan_module
from toolshell.registry.entry import ToolEntry
from toolshell.store.sqlite import Store

TOOLS = {
    ("github", "list-pulls"): ToolEntry("github", "list_pulls", annotations={"readOnlyHint": True}),
    ("github", "delete-branch"): ToolEntry("github", "delete_branch", annotations={"destructiveHint": True}),
    ("github", "get-pull"): ToolEntry("github", "get_pull", annotations={"readOnlyHint": True}),
    ("linear", "create-issue"): ToolEntry(
        "linear", "create_issue", annotations={"destructiveHint": False, "openWorldHint": False}
    ),
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _resolver(policy: Policy) -> Any:
    """A small stand-in for the command package: `tools <server> <tool> key=value …`."""

    async def resolve(call: ScannedCall) -> tuple[str, dict[str, Any] | None, Risk] | None:
        if not call.argv or call.argv[0] is None or call.argv[0].startswith("-") or len(call.argv) < 2:
            return None
        entry = TOOLS[(call.argv[0], call.argv[1] or "")]
        input: dict[str, Any] | None = None
        if call.literal and not call.input_from_stdin:
            input = dict(str(w).split("=", 1) for w in call.argv[2:])
        return entry.command, input, await policy.assess(entry, input)

    return resolve


async def _plan(script: str) -> dict[str, Any]:
    return await plan_json_async(scan(script), _resolver(Policy(Config(), Store())))


@pytest.mark.anyio
async def test_the_seed_plan_example() -> None:
    out = await _plan("tools github list-pulls state=open\ntools github delete-branch branch=fix-x\n")
    assert json.dumps(out) == json.dumps(
        {
            "calls": [
                {"tool": "tools github list-pulls", "input": {"state": "open"}, "risk": "read_only", "where": "script"},
                {
                    "tool": "tools github delete-branch",
                    "input": {"branch": "fix-x"},
                    "risk": "needs_approval",
                    "why": "destructive",
                    "where": "script",
                },
            ],
            "complete": True,
        }
    )


@pytest.mark.anyio
async def test_an_input_built_at_run_time_is_null_and_checked_then() -> None:
    script = """
tools github list-pulls repo=acme/api | jq -r '.[].number' | while read n; do
  tools github get-pull repo=acme/api "number=$n"
  tools linear create-issue "title=PR $n"
done
"""
    assert (await _plan(script))["calls"] == [
        {"tool": "tools github list-pulls", "input": {"repo": "acme/api"}, "risk": "read_only", "where": "script"},
        {
            "tool": "tools github get-pull",
            "input": None,
            "risk": "checked_at_run_time",
            "tool_risk": "read_only",
            "where": "script",
        },
        {
            "tool": "tools linear create-issue",
            "input": None,
            "risk": "checked_at_run_time",
            "tool_risk": "changes",
            "where": "script",
        },
    ]


@pytest.mark.anyio
async def test_a_call_that_takes_its_input_from_a_pipe_is_checked_at_run_time() -> None:
    out = await _plan(
        "jq -n '{branch: \"x\"}' | tools github delete-branch\necho ignored | tools github delete-branch branch=y\n"
    )
    assert [(c["input"], c["risk"]) for c in out["calls"]] == [
        (None, "checked_at_run_time"),
        ({"branch": "y"}, "needs_approval"),
    ]


@pytest.mark.anyio
async def test_an_eval_makes_the_plan_incomplete_and_says_why() -> None:
    out = await _plan('tools github list-pulls\neval "tools github delete-branch branch=$b"\n')
    assert out["complete"] is False
    assert out["reasons"] == ["line 2: `eval` runs text as a script, which may call tools the plan cannot see"]


def test_plan_json_leaves_out_commands_the_resolver_says_are_not_calls() -> None:
    found = scan("tools --help\ntools github list-pulls\n")
    out = plan_json(
        found, lambda c: None if c.argv == ["--help"] else ("tools github list-pulls", {}, Risk("read_only"))
    )
    assert out == {
        "calls": [{"tool": "tools github list-pulls", "input": {}, "risk": "read_only", "where": "script"}],
        "complete": True,
    }


@pytest.mark.parametrize(
    ("script", "where"),
    [
        ("x=$(tools a b)", "substitution"),
        ("echo `tools a b`", "substitution"),
        ('echo "$(tools a b)"', "substitution"),
        ("diff <(tools a b) f", "substitution"),
        ("echo $(( $(tools a b) + 1 ))", "substitution"),
        ("f() { tools a b; }", "function"),
        ("function f { x=$(tools a b); }", "function"),  # a function may never run: that says more
        ("if true; then for i in 1; do tools a b; done; fi", "script"),
        ("( tools a b ) && { tools a b; }", "script"),
    ],
)
def test_where_a_call_sits(script: str, where: str) -> None:
    found = scan(script)
    assert {c.where for c in found.calls} == {where}
    assert found.complete


@pytest.mark.parametrize(
    ("script", "reads"),
    [
        ("echo '{}' | tools a b", True),
        ("tools a b < in.json", True),
        ("tools a b <<< '{}'", True),
        ("tools a b <<'EOF'\n{}\nEOF", True),
        ("cat f | while read n; do tools a b; done", True),
        ("while read n; do tools a b; done < f", True),
        ("f() { tools a b; }", True),  # the function's caller may pipe into it
        ("tools a b | jq .", False),
        ("tools a b > out.json 2>&1", False),
        ("tools a b", False),
        ("cat <<EOF && tools a b\nbody\nEOF", False),
    ],
)
def test_reads_stdin_when_a_pipe_or_redirect_feeds_the_call(script: str, reads: bool) -> None:
    [call] = scan(script).calls
    assert call.reads_stdin is reads


@pytest.mark.parametrize(
    ("argv", "from_stdin"),
    [
        (["gh", "list"], True),
        (["gh", "list", "-"], True),
        (["gh", "list", "-", "n=1"], True),
        (["gh", "list", "n=1"], False),
        (["gh", "list", "--draft"], False),
        (["gh", "list", '{"n":1}'], False),
    ],
)
def test_stdin_is_the_input_when_there_is_dash_or_no_input_argument(argv: list[str | None], from_stdin: bool) -> None:
    assert ScannedCall(argv, True, True, "script", 1).input_from_stdin is from_stdin
    assert ScannedCall(argv, True, False, "script", 1).input_from_stdin is False


@pytest.mark.parametrize(
    ("script", "argv"),
    [
        (
            """tools gh create 'title=a "b"' "body=x \\"y\\" \\$z" $'n=1\\t2'""",
            ["gh", "create", 'title=a "b"', 'body=x "y" $z', "n=1\t2"],
        ),
        ("tools gh x k=a\\ b '{\"a\": [1, 2]}'", ["gh", "x", "k=a b", '{"a": [1, 2]}']),
        ('"tools" gh x', ["gh", "x"]),
        ("tools gh x n=$n", ["gh", "x", None]),
        ('tools gh x "n=${n}"', ["gh", "x", None]),
        ("tools gh x files=*.txt", ["gh", "x", None]),
        ("tools gh x {a,b}", ["gh", "x", None]),
        ("tools gh x ~/f", ["gh", "x", None]),
        ("tools gh x path=~/f", ["gh", "x", None]),
        ("tools gh x '{}' {}", ["gh", "x", "{}", "{}"]),
        ("tools gh x $(date)", ["gh", "x", None]),
    ],
)
def test_words_are_literal_only_when_nothing_expands_at_run_time(script: str, argv: list[str | None]) -> None:
    call = next(c for c in scan(script).calls if c.where == "script")
    assert call.argv == argv
    assert call.literal is (None not in argv)


def test_a_call_through_xargs_gets_words_at_run_time() -> None:
    [call] = scan("echo 1 2 | xargs -n1 tools gh get-pull repo=a").calls
    assert (call.argv, call.literal) == (["gh", "get-pull", "repo=a", None], False)


@pytest.mark.parametrize(
    "script",
    ["command tools gh x", "time tools gh x", "env A=1 tools gh x", "timeout 5 tools gh x", "nohup tools gh x"],
)
def test_calls_through_wrappers_are_found(script: str) -> None:
    found = scan(script)
    assert [c.argv for c in found.calls] == [["gh", "x"]]
    assert found.complete


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        ('eval "$cmd"', "line 1: `eval` runs text as a script, which may call tools the plan cannot see"),
        ("source ./more.sh", "line 1: `source` runs another file, which may call tools the plan cannot see"),
        (". ./more.sh", "line 1: `.` runs another file, which may call tools the plan cannot see"),
        (
            "bash -c 'tools gh x'",
            "line 1: `bash` runs another shell script (e.g. `bash -c`), which may call tools the plan cannot see",
        ),
        (
            "echo x | sh -c 'tools gh x'",
            "line 1: `sh` runs another shell script (e.g. `sh -c`), which may call tools the plan cannot see",
        ),
        (
            "trap 'tools gh x' EXIT",
            "line 1: `trap` runs text as a script later, which may call tools the plan cannot see",
        ),
        ("$cmd gh x", "line 1 runs a command whose name is computed ($cmd), which may be `tools`"),
        (
            "tools() { echo fake; }\ntools gh x",
            "line 1 defines a function named `tools`, so `tools` may not mean the tools command",
        ),
        ("alias tools='echo'", "line 1 defines an alias that may redefine `tools`"),
        ('command "$t" gh x', "line 1: `command` runs a command whose name is computed, which may be `tools`"),
        (
            "tools scripts triage repo=a/b",
            "line 1 runs a saved script (`tools scripts triage`), whose own calls are not listed",
        ),
    ],
)
def test_what_hides_calls_makes_the_scan_incomplete(script: str, reason: str) -> None:
    found = scan(script)
    assert found.complete is False
    assert found.reasons[0] == reason


def test_a_script_that_does_not_parse_is_incomplete() -> None:
    found = scan('tools gh x\necho "$(\n')
    assert found.complete is False
    assert found.reasons[0].startswith("the script does not parse near line 2")


def test_heredoc_bodies_are_not_commands_but_their_substitutions_run() -> None:
    found = scan("cat <<'EOF'\ntools gh quoted\nEOF\ncat <<EOF\ntools gh plain $(tools gh sub)\nEOF\n")
    assert [(c.argv, c.where, c.line) for c in found.calls] == [(["gh", "sub"], "substitution", 5)]
    assert found.complete


def test_calls_keep_their_line_and_source_text() -> None:
    found = scan("echo start\n\ntools gh x n=1 2>/dev/null\n")
    assert [(c.line, c.text) for c in found.calls] == [(3, "tools gh x n=1")]


def test_saving_or_listing_scripts_hides_nothing() -> None:
    assert scan("tools scripts\ntools scripts save t --description d < f").complete


def test_calls_bashkit_sees_and_tree_sitter_missed_make_the_scan_incomplete(monkeypatch: pytest.MonkeyPatch) -> None:
    tools = SimpleNamespace(name="tools")
    fake = SimpleNamespace(commands=[tools, tools], has_interpreter_reentry=False, truncated=False)
    monkeypatch.setattr(plan_module, "_analyzer", lambda: SimpleNamespace(analyze=lambda script: fake))
    found = scan("tools gh x")
    assert found.complete is False
    assert found.reasons == ["bashkit's parser sees 2 `tools` commands where this plan found 1"]


def test_the_cross_check_agrees_with_tree_sitter_on_ordinary_scripts() -> None:
    script = """
set -e
tools github list-pulls '{"repo":"acme/api","state":"open"}' \\
  | jq -r '.[] | select(.draft | not) | .number' \\
  | while read n; do
      tools github get-pull "repo=acme/api" "number=$n" | jq -c '{number, title, mergeable}'
    done
summary=$(tools github list-pulls state=closed | jq length)
case "$summary" in 0) tools linear create-issue title=none ;; esac
"""
    found = scan(script)
    assert found.complete, found.reasons
    assert [(c.line, c.where, c.literal, c.reads_stdin) for c in found.calls] == [
        (3, "script", True, False),
        (6, "script", False, True),
        (8, "substitution", True, False),
        (9, "script", True, False),
    ]


def test_a_deeply_nested_script_is_read_without_running_out_of_stack() -> None:
    found = scan("(" * 1500 + "tools github list-pulls" + ")" * 1500)
    assert found.complete is False
    assert found.reasons[0] == "the script does not parse near line 1; calls after it may be missed"


def test_a_call_deep_inside_substitutions_is_still_found() -> None:
    found = scan("$(" * 1500 + "tools github list-pulls" + ")" * 1500)
    assert found.calls[0] == ScannedCall(
        ["github", "list-pulls"], True, False, "substitution", 1, "tools github list-pulls"
    )
    assert found.complete is False  # bashkit refuses this nesting, and the outer names are computed


def test_nesting_too_deep_for_python_makes_the_scan_incomplete_with_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    def too_deep(*args: Any) -> None:
        raise RecursionError

    monkeypatch.setattr(plan_module, "_command", too_deep)
    found = scan("tools github list-pulls")
    assert found.complete is False
    assert found.reasons == [
        "the script nests too deeply to read; calls inside it may be missed",
        "bashkit's parser sees 1 `tools` commands where this plan found 0",
    ]
