"""`tools scripts …` inside a shell call: list, save, delete, describe and run saved scripts.

A saved script runs in a fresh `Bash` (a builtin must never re-enter its own shell) that shares the
caller's shell call: the same tools, approvals, call budget and report. `curl` is not there.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from bashkit import BuiltinContext, BuiltinResult

from toolshell.command.inputs import build_input
from toolshell.errors import ErrorCode, ToolshellError
from toolshell.policy.plan import syntax_error
from toolshell.scripts.store import ScriptStore
from toolshell.scripts.verbs import USAGE, check_can_save, check_depth, list_text, parse_scripts_args, script_help
from toolshell.session import both_streams

if TYPE_CHECKING:
    from toolshell.shell_call import ShellCall

INPUT_PATH = "/tmp/.toolshell-script-input.json"


async def run_scripts_verb(call: ShellCall, ctx: BuiltinContext, args: list[str], depth: int) -> BuiltinResult:
    """Carry out one `tools scripts …` command for the shell call `call`."""
    request = parse_scripts_args(args)
    store = ScriptStore(call.host.store)
    manage = call.host.config.tools_in_shell.manage_scripts
    if request.verb == "list":
        return BuiltinResult(stdout=list_text(store.list()))
    if request.verb == "help":
        if request.name is None:
            return BuiltinResult(stdout=USAGE)
        return BuiltinResult(stdout=script_help(store.require(request.name)))
    if request.verb == "save":
        check_can_save(manage)
        assert request.name is not None
        body = ctx.stdin or ""
        if (problem := syntax_error(body)) is not None:
            raise ToolshellError(
                ErrorCode.INVALID_INPUT, f"the script does not parse ({problem}); fix it, nothing was saved"
            )
        saved = store.save(request.name, body, request.description, request.input_schema)
        return BuiltinResult(stdout=f"saved script {saved.name}\n")
    if request.verb == "delete":
        check_can_save(manage, "delete")
        assert request.name is not None
        store.delete(request.name)
        return BuiltinResult(stdout=f"deleted script {request.name}\n")
    assert request.name is not None
    script = store.require(request.name)
    arguments = build_input(request.input_args, ctx.stdin, script.input_schema)
    store.check_input(script, arguments)
    return await run_saved(call, script.body, arguments, depth + 1)


async def run_saved(call: ShellCall, body: str, arguments: dict[str, Any], depth: int) -> BuiltinResult:
    """Run a saved script's body with `arguments` as JSON on stdin, in a fresh shell of the session."""
    check_depth(depth)

    async def tools(ctx: BuiltinContext) -> BuiltinResult:
        return await call.handle(ctx, depth=depth)

    shell = call.session.new_shell(tools, network=False)
    shell.write_file(INPUT_PATH, json.dumps(arguments, ensure_ascii=False))
    out: list[str] = []
    err: list[str] = []
    call.shells.append(shell)
    try:
        result = await shell.execute(f"{{\n{body}\n}} < {INPUT_PATH}", on_output=both_streams(out.append, err.append))
    finally:
        call.shells.remove(shell)
    if call.stopped:
        # The stop already went to the caller's stderr; end the caller's script too.
        return BuiltinResult(stdout="".join(out), exit_code=1)
    if result.error and not result.success:
        err.append(f"{result.error}\n")
    return BuiltinResult(stdout="".join(out), stderr="".join(err), exit_code=result.exit_code)


__all__ = ["run_scripts_verb", "run_saved"]
