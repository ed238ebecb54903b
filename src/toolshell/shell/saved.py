"""`tools scripts …` inside a shell call: list, save, delete, describe and run saved scripts.

A saved script runs in a fresh `Bash` (a builtin must never re-enter its own shell) that shares the
caller's shell call: the same tools, approvals, call budget and report. It has no network commands.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from bashkit import BuiltinContext, BuiltinResult

from toolshell.command.inputs import build_input
from toolshell.errors import ErrorCode, ToolshellError
from toolshell.policy.plan import syntax_error
from toolshell.scripts.verbs import USAGE, check_can_save, check_depth, list_text, parse_scripts_args, script_help
from toolshell.shell.bash import Builtin, both_streams, new_shell
from toolshell.shell.input_files import shell_reader
from toolshell.shell.state import ShellCallState

INPUT_PATH = "/tmp/.toolshell-script-input.json"
ToolsAt = Callable[[int], Builtin]
"""The `tools` builtin for a shell at a nesting depth."""


async def run_scripts_verb(
    state: ShellCallState, ctx: BuiltinContext, args: list[str], depth: int, tools_at: ToolsAt
) -> BuiltinResult:
    """Carry out one `tools scripts …` command of the shell call `state`."""
    request = parse_scripts_args(args)
    store = state.scripts
    if request.verb == "list":
        return BuiltinResult(stdout=list_text(store.list()))
    if request.verb == "help":
        if request.name is None:
            return BuiltinResult(stdout=USAGE)
        return BuiltinResult(stdout=script_help(store.require(request.name)))
    if request.verb == "save":
        check_can_save(state.manage_scripts)
        assert request.name is not None
        body = ctx.stdin or ""
        if (problem := syntax_error(body)) is not None:
            raise ToolshellError(
                ErrorCode.INVALID_INPUT, f"the script does not parse ({problem}); fix it, nothing was saved"
            )
        saved = store.save(request.name, body, request.description, request.input_schema)
        return BuiltinResult(stdout=f"saved script {saved.name}\n")
    if request.verb == "delete":
        check_can_save(state.manage_scripts, "delete")
        assert request.name is not None
        store.delete(request.name)
        return BuiltinResult(stdout=f"deleted script {request.name}\n")
    assert request.name is not None
    script = store.require(request.name)
    read_file = shell_reader(ctx.fs, ctx.cwd, state.max_result_bytes)
    arguments = build_input(request.input_args, ctx.stdin, script.input_schema, read_file)
    store.check_input(script, arguments)
    return await run_saved(state, script.body, arguments, depth + 1, tools_at)


async def run_saved(
    state: ShellCallState, body: str, arguments: dict[str, Any], depth: int, tools_at: ToolsAt
) -> BuiltinResult:
    """Run a saved script's body with `arguments` as JSON on stdin, in a fresh shell of the session."""
    check_depth(depth)
    shell = new_shell(state.shell_config, tools_at(depth), network=False)
    shell.write_file(INPUT_PATH, json.dumps(arguments, ensure_ascii=False))
    out: list[str] = []
    err: list[str] = []
    state.shells.append(shell)
    try:
        result = await shell.execute(f"{{\n{body}\n}} < {INPUT_PATH}", on_output=both_streams(out.append, err.append))
    finally:
        state.shells.remove(shell)
    if state.ledger.stopped:
        # The stop already went to the caller's stderr; end the caller's script too.
        return BuiltinResult(stdout="".join(out), exit_code=1)
    if result.error and not result.success:
        err.append(f"{result.error}\n")
    return BuiltinResult(stdout="".join(out), stderr="".join(err), exit_code=result.exit_code)
