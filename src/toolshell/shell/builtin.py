"""The `tools` builtin: verb dispatch, and the one error boundary of a `tools` command.

    ToolsBuiltin.__call__(ctx)          parse → dispatch; the one try/except → error line or stop
      ensure_loaded(argv)               the lazy-load helper (`calls.view`)
      prepare(catalog, argv, stdin)     pure: resolve, build input, validate (`calls.prepare`)
      pipeline.send(prepared)           ledger → approval → guards → the call (`calls.pipeline`)
      render(result, …)                 pure; images come back as data and are written here

One `ShellCallState` (`shell.state`) is shared by the builtin of the session's shell and those of the saved scripts
it runs (`depth` > 0), so they share one budget, report and stop.
"""

from __future__ import annotations

import json
import logging
import posixpath
import time
from typing import Any

from bashkit import BuiltinContext, BuiltinResult

from toolshell.calls.pipeline import Sent
from toolshell.calls.prepare import PreparedCall, prepare_input, resolve
from toolshell.command.argv import Help, Invoke, Plan, Scripts, Search, parse
from toolshell.command.helptext import search_text, server_help, tool_help, top_help, verb_help
from toolshell.command.inputs import build_input, given_input
from toolshell.command.render import Image, Rendered, render_result
from toolshell.errors import ErrorCode, StopScript, ToolshellError, error_line, unexpected
from toolshell.registry.entry import ToolEntry
from toolshell.shell.input_files import shell_reader
from toolshell.shell.output import too_big
from toolshell.shell.saved import run_scripts_verb
from toolshell.shell.state import ShellCallState

logger = logging.getLogger(__name__)
_STOPPED = "an earlier call stopped the script, so this call did not run"


class ToolsBuiltin:
    """The `tools` command of one shell (`depth` 0: the session's; > 0: a saved script's)."""

    def __init__(self, state: ShellCallState, depth: int = 0) -> None:
        self.state = state
        self.depth = depth

    async def __call__(self, ctx: BuiltinContext) -> BuiltinResult:
        result = await self._run(ctx)
        redact = self.state.redact
        if redact:  # a server's output or error can quote a secret of the config; the script never sees it
            result = BuiltinResult(
                stdout=redact(result.stdout), stderr=redact(result.stderr), exit_code=result.exit_code
            )
        return result

    async def _run(self, ctx: BuiltinContext) -> BuiltinResult:
        state = self.state
        words: list[str] | None = list(ctx.argv)  # the call's words, for its timeline row; None: a verb
        entry: ToolEntry | None = None
        given: dict[str, Any] = {}  # what the call was given, as far as it was read
        warned = ""  # arguments the schema does not name: said on stderr whatever the outcome
        started = time.perf_counter()
        try:
            if state.ledger.stopped:
                raise ToolshellError(ErrorCode.STOPPED, _STOPPED)
            request = parse(list(ctx.argv))
            if not isinstance(request, Invoke):
                words = None
                return await self._verb(request, ctx)
            words = request.argv
            look = await state.view.ensure_loaded(request.argv)
            # `prepare` in its two steps, so the timeline row of a call with bad input names its tool.
            entry, rest = resolve(state.view.catalog, request.argv, look)
            read_file = shell_reader(ctx.fs, ctx.cwd, state.max_result_bytes)
            try:
                given = build_input(rest, ctx.stdin, entry.input_schema, read_file)
            except BaseException:
                given = given_input(rest)  # the row of a call whose input could not be built: what its words gave
                raise
            prepared = prepare_input(entry, given)
            warned = "".join(f"{w}\n" for w in prepared.warnings)
            rendered: list[Rendered] = []  # rendered once: the size check before the record, then the output
            sent = await state.pipeline.send(prepared, lambda s: rendered.append(self._render(ctx, s)))
            return _warned(warned, self._output(ctx, rendered[0] if rendered else self._render(ctx, sent)))
        except ToolshellError as err:
            self._ended(words, entry, given, str(err.code), started)
            return _warned(warned, _fail(err))
        except StopScript as stop:
            self._ended(words, entry, given, str(stop.error.code), None)
            return self._stop(stop)
        except Exception as exc:  # the boundary: a bug or an odd tool result must not lose the error line
            logger.debug("tools %s failed unexpectedly", " ".join(ctx.argv[:2]), exc_info=True)
            internal = unexpected(exc, "tools could not run this command")
            self._ended(words, entry, given, str(internal.code), started)
            return _warned(warned, _fail(internal))

    def _ended(
        self, words: list[str] | None, entry: ToolEntry | None, given: dict[str, Any], code: str, started: float | None
    ) -> None:
        """The timeline row of a call that ended with an error: what it was given, whatever failed."""
        if entry is not None:
            self.state.ledger.ended(entry, given, code, started)
        elif words is not None:  # help, search, plan and the scripts verb are not calls
            self.state.ledger.ended_unresolved(words, code, started)

    def _render(self, ctx: BuiltinContext, sent: Sent) -> Rendered:
        """The result as the script gets it; raises the error of one it must not get."""
        entry = sent.prepared.entry
        rendered = render_result(  # whole: pipes, redirects and $(…) get all of it
            sent.result,
            tool="-".join(w for w in (entry.server, entry.name) if w).replace("_", "-"),
            output_schema=entry.output_schema,
            taken=_taken_images(ctx) if _has_images(sent.result) else frozenset(),
            redact=self.state.redact,  # before the images are written: their bytes can quote a secret
        )
        if rendered.error is not None:
            raise _tool_error(rendered.error, entry)
        size = len(rendered.stdout.encode("utf-8", "surrogatepass"))
        if size > self.state.max_result_bytes:  # a memory guard, not a cut: half a result would mislead
            raise too_big(entry.command, size, self.state.max_result_bytes, entry.input_schema)
        return rendered

    def _output(self, ctx: BuiltinContext, rendered: Rendered) -> BuiltinResult:
        stderr = _write_images(ctx, rendered.images) if rendered.images else ""
        return BuiltinResult(stdout=_text_safe(rendered.stdout), stderr=stderr)

    # --- verbs -------------------------------------------------------------------------------

    async def _verb(self, request: Any, ctx: BuiltinContext) -> BuiltinResult:
        if isinstance(request, Help):
            return BuiltinResult(stdout=await self._help(request.target))
        if isinstance(request, Search):
            return BuiltinResult(stdout=await self._search(request.query))
        if isinstance(request, Plan):
            plan = await self.state.precheck.plan(ctx.stdin or "")
            return BuiltinResult(stdout=json.dumps(plan, indent=2, ensure_ascii=False) + "\n")
        assert isinstance(request, Scripts)
        return await run_scripts_verb(self.state, ctx, request.args, self.depth, lambda d: ToolsBuiltin(self.state, d))

    async def _help(self, target: list[str]) -> str:
        view = self.state.view
        if not target:
            return top_help(view.catalog)
        if len(target) == 1 and (text := verb_help(target[0])) is not None:
            return text
        await view.ensure_loaded(target, retry_failed=False)
        look = view.catalog.lookup(target)
        if look.kind == "server" and look.server is not None:
            if look.rest:
                raise ToolshellError(
                    ErrorCode.UNKNOWN_COMMAND,
                    f"no tool {look.rest[0]!r} in server {look.server.name!r}; run `tools {look.server.name} --help`",
                )
            return server_help(view.catalog, target[0])
        if look.entry is None:
            return server_help(view.catalog, target[0])
        return tool_help(look.entry)

    async def _search(self, query: str) -> str:
        view = self.state.view
        await view.load_quietly(view.catalog.unloaded_servers_matching(query))
        return search_text(view.catalog.search(query), view.catalog.unsearched())

    # --- stops -------------------------------------------------------------------------------

    def _stop(self, stop: StopScript) -> BuiltinResult:
        """End the script at this call: nothing after it runs, and it is never resumed."""
        self.state.ledger.stop(stop)
        line = error_line(stop.error)
        if self.state.stderr_sink is not None:
            self.state.stderr_sink(line)  # bashkit drops the output of the command that cancels
        for shell in self.state.shells:
            shell.cancel()
        return BuiltinResult(stderr=line, exit_code=1)


def _warned(warning: str, result: BuiltinResult) -> BuiltinResult:
    if not warning:
        return result
    return BuiltinResult(stdout=result.stdout, stderr=_text_safe(warning) + result.stderr, exit_code=result.exit_code)


def _fail(err: ToolshellError) -> BuiltinResult:
    return BuiltinResult(stderr=_text_safe(error_line(err)), exit_code=1)


def _write_images(ctx: BuiltinContext, images: list[Image]) -> str:
    lines = []
    for image in images:
        path = posixpath.join(ctx.cwd, image.suggested_name)
        ctx.fs.mkdir(posixpath.dirname(path), recursive=True)
        ctx.fs.write_file(path, image.data)
        lines.append(f"tools: image saved to {image.suggested_name} ({image.mime_type})\n")
    return "".join(lines)


def _has_images(result: Any) -> bool:
    return any(getattr(b, "type", "") == "image" for b in result.content)


def _taken_images(ctx: BuiltinContext) -> frozenset[str]:
    folder = posixpath.join(ctx.cwd, "tool-images")
    if not ctx.fs.exists(folder):
        return frozenset()
    return frozenset(f"tool-images/{e['name']}" for e in ctx.fs.read_dir(folder))


def _text_safe(text: str) -> str:
    """Replace lone surrogates (a server's broken UTF-16) so the shell can carry the text."""
    return text.encode("utf-8", "replace").decode("utf-8")


def _tool_error(err: ToolshellError, entry: ToolEntry) -> ToolshellError:
    """A tool's soft error. The top-level web-fetch's `denied:` refusal (its SSRF guard) is `denied`;
    an MCP server cannot fake a refusal that way."""
    if entry.server is None and err.message.startswith("denied:"):
        return ToolshellError(ErrorCode.DENIED, err.message.removeprefix("denied:").strip())
    return err


__all__ = ["PreparedCall", "ShellCallState", "ToolsBuiltin"]
