"""`tools plan`: find every `tools` call a script makes that can be seen without running it.

`scan(script)` parses the script with tree-sitter-bash and walks every command, including those in
`$(…)`, backticks, `<(…)`, loops, conditions and function bodies. Heredoc bodies are text, not
commands (unless an unquoted heredoc holds a `$(…)`, which runs).

Each call is a `ScannedCall`:
- `argv`: the words after `tools`, quotes removed. A word bash expands at run time (`$n`, `$(…)`,
  a glob, `{a,b}`) is None, and then `literal` is False. A None stands for "words known only at
  run time": an unquoted `$args` may become zero or several words, and a call run by `xargs` ends
  with a None for the words xargs appends.
- `reads_stdin`: the call gets a pipe or a redirect as stdin (`… | tools x y`, `tools x y < f`,
  `<<<`, a heredoc, a `… | while read` loop around it), or it sits in a function body, whose
  caller's stdin cannot be known. Whether the call *uses* stdin depends on its arguments (DESIGN §4);
  `input_from_stdin` applies that rule.
- `where`: `function` inside a function body (the call runs only if the function is called),
  else `substitution` inside `$(…)`, backticks or `<(…)`, else `script`.

`Scan.complete` is False, with a reason for each, when the script may make calls nobody can read:
`eval`, `source`/`.`, `bash -c`/`sh …`, `trap '…'`, a computed command name (`$cmd args`), a
redefined `tools` (a function or alias of that name), a saved script run with `tools scripts NAME`,
or a script that does not parse. bashkit's own `Bash.analyze` is a second reader: when it sees
`tools` commands this scan missed, or says the script re-enters an interpreter, the scan is
incomplete too.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

from toolshell.policy.risk import Risk
from toolshell.policy.words import literal_value

_LANGUAGE = Language(tree_sitter_bash.language())
_REDIRECTS = ("file_redirect", "heredoc_redirect", "herestring_redirect")
_SUBSTITUTIONS = ("command_substitution", "process_substitution")
_HIDING = {
    "eval": "`eval` runs text as a script",
    "source": "`source` runs another file",
    ".": "`.` runs another file",
    "trap": "`trap` runs text as a script later",
}
_SHELLS = ("bash", "sh", "dash", "zsh", "ksh", "ash")
# Commands that run their argument as a command: (name, options that take a value).
_WRAPPERS: dict[str, tuple[str, ...]] = {
    "command": (),
    "exec": ("-a",),
    "builtin": (),
    "nohup": (),
    "time": (),
    "nice": ("-n",),
    "timeout": ("-s", "-k", "--signal", "--kill-after"),
    "env": ("-u", "-C", "--unset", "--chdir"),
    "stdbuf": ("-i", "-o", "-e"),
    "xargs": ("-I", "-n", "-L", "-d", "-P", "-s", "-E", "-a", "-i"),
}
_SCRIPTS_VERBS = ("save", "show", "delete", "remove", "list", "help")


@dataclass(frozen=True)
class ScannedCall:
    """One `tools` command found in a script (see the module docstring for each field)."""

    argv: list[str | None]
    literal: bool
    reads_stdin: bool
    where: str
    line: int
    text: str = ""

    @property
    def input_from_stdin(self) -> bool:
        """True when the call's input comes from stdin, so it is built while the script runs.

        DESIGN §4: stdin is read when the arguments contain `-` or hold no input at all (no
        `key=value`, `--flag` or JSON word); with only pairs and flags it is left alone.
        """
        if not self.reads_stdin:
            return False
        if not self.literal:
            return True
        words = [w for w in self.argv if w is not None]
        return "-" in words or not any(w.startswith(("-", "{")) or "=" in w for w in words)


@dataclass
class Scan:
    """What `scan` found: the calls in source order, whether that is all of them, and why not."""

    calls: list[ScannedCall] = field(default_factory=list)
    complete: bool = True
    reasons: list[str] = field(default_factory=list)
    direct_calls: int = field(default=0, repr=False, compare=False)
    """Calls written as `tools …` (not through a wrapper such as `xargs`): what bashkit can count."""

    unseen: bool = field(default=False, repr=False, compare=False)
    """Incomplete for a reason other than a saved script's run (whose body can be read in turn)."""

    cross_checked: bool = field(default=True, repr=False, compare=False)
    """False in the kept scan of a script whose calls alone were asked for (`scanned_calls`):
    bashkit's reading, which only ever adds reasons, is still to come."""

    def hide(self, reason: str, *, saved_run: bool = False) -> None:
        if reason not in self.reasons:
            self.reasons.append(reason)
        self.complete = False
        self.unseen = self.unseen or not saved_run


@dataclass(frozen=True)
class _Ctx:
    where: str = "script"
    stdin: bool = False


SCAN_CACHE_SIZE = 256
"""How many scans of recent scripts are kept: an agent runs the same few scripts again and again."""
SCAN_CACHE_MAX_CHARS = 16_000
"""Longer scripts are scanned every time (the cache stays within ~4 MB of script text)."""
_scans: OrderedDict[str, Scan] = OrderedDict()


def scan(script: str) -> Scan:
    """Find the `tools` calls in `script` without running it.

    A scan depends on the text alone, so the scans of recent scripts are reused (a bounded LRU);
    each caller gets its own copy.

    Args:
        script: bash source, e.g. the text `tools plan` read from stdin.

    Returns:
        A `Scan`; `complete` is False when some calls may be hidden from reading.
    """
    kept = _kept(script, cross_check=True)
    calls = _copies(kept.calls)
    return dataclasses.replace(kept, calls=calls, reasons=list(kept.reasons))  # every field, `unseen` too


def scanned_calls(script: str) -> list[ScannedCall]:
    """`scan(script).calls` alone, for the before-start check, which reads nothing else: bashkit's
    cross-check, which only adds reasons a scan is incomplete, is left for a `scan` that needs them."""
    return _copies(_kept(script, cross_check=False).calls)


def _copies(calls: list[ScannedCall]) -> list[ScannedCall]:
    return [dataclasses.replace(c, argv=list(c.argv)) for c in calls]  # a caller cannot change the cache


def _kept(script: str, *, cross_check: bool) -> Scan:
    """The kept scan of `script` (made now if there is none), cross-checked when asked."""
    kept = _scans.get(script)
    if kept is None:
        kept = _scan(script, cross_check=cross_check)
        if len(script) <= SCAN_CACHE_MAX_CHARS:
            _scans[script] = kept
            if len(_scans) > SCAN_CACHE_SIZE:
                _scans.popitem(last=False)
        return kept
    _scans.move_to_end(script)
    if cross_check and not kept.cross_checked:  # its calls were read before; the reasons come now
        _cross_check(script, kept)
        kept.cross_checked = True
    return kept


def _scan(script: str, *, cross_check: bool = True) -> Scan:
    tree = Parser(_LANGUAGE).parse(script.encode())
    found = Scan()
    if tree.root_node.has_error:
        found.hide(
            f"the script does not parse near line {_first_error_line(tree.root_node)}; calls after it may be missed"
        )
    try:
        _walk(tree.root_node, _Ctx(), found)
    except RecursionError:  # a word nested past Python's stack (the walk itself has no limit)
        found.hide("the script nests too deeply to read; calls inside it may be missed")
    if cross_check:
        _cross_check(script, found)
    found.cross_checked = cross_check
    return found


def _walk(root: Node, ctx: _Ctx, found: Scan) -> None:
    """Visit every node in source order. A stack, not recursion: nesting depth is the script's."""
    stack: list[tuple[Node, _Ctx]] = [(root, ctx)]
    while stack:
        node, ctx = stack.pop()
        stack.extend(reversed(_visit(node, ctx, found)))


def _visit(node: Node, ctx: _Ctx, found: Scan) -> list[tuple[Node, _Ctx]]:
    """Handle one node; return its children to visit, each with the context it runs in."""
    kind = node.type
    if kind == "function_definition":
        _function(node, found)
        ctx = _Ctx("function", True)
    elif kind in _SUBSTITUTIONS and ctx.where == "script":
        ctx = _Ctx("substitution", ctx.stdin)
    elif kind == "redirected_statement":
        return _redirected(node, ctx)
    elif kind == "command":
        _command(node, ctx, found)
    if kind != "pipeline":
        return [(child, ctx) for child in node.children]
    children: list[tuple[Node, _Ctx]] = []
    after = ctx  # the commands after a `|` read the pipe
    for child in node.children:
        if child.type in ("|", "|&"):
            after = _Ctx(ctx.where, True)
            continue
        children.append((child, after))
    return children


def _redirected(node: Node, ctx: _Ctx) -> list[tuple[Node, _Ctx]]:
    """`body < file`: the body's commands read the redirect; the redirects' own parts do not."""
    takes_stdin = any(_is_stdin_redirect(c) for c in node.children if c.type in _REDIRECTS)
    inner = _Ctx(ctx.where, True) if takes_stdin else ctx
    return [(child, ctx if child.type in _REDIRECTS else inner) for child in node.children]


def _is_stdin_redirect(node: Node) -> bool:
    fd = next((c for c in node.children if c.type == "file_descriptor"), None)
    if fd is not None and (fd.text or b"") != b"0":
        return False
    if node.type in ("heredoc_redirect", "herestring_redirect"):
        return True
    return any(c.type in ("<", "<&", "<>", "<&-") for c in node.children)


def _function(node: Node, found: Scan) -> None:
    name = node.child_by_field_name("name")
    if name is not None and literal_value(name) == "tools":
        found.hide(
            f"line {node.start_point[0] + 1} defines a function named `tools`, so `tools` may not mean the "
            "tools command"
        )


def _command(node: Node, ctx: _Ctx, found: Scan) -> None:
    name_node = node.child_by_field_name("name")
    if name_node is None:
        return  # a bare assignment: its substitutions are walked as children
    name = literal_value(name_node.children[0]) if name_node.children else None
    skip = ("command_name", "variable_assignment", "comment", *_REDIRECTS)
    args = [c for c in node.children if c.is_named and c.type not in skip]
    line = node.start_point[0] + 1
    if name is None:
        found.hide(f"line {line} runs a command whose name is computed ({_text(name_node)}), which may be `tools`")
        return
    _classify(name, args, node, ctx, found, line)


def _classify(
    name: str, args: list[Node], node: Node, ctx: _Ctx, found: Scan, line: int, wrapped: str | None = None
) -> None:
    stdin = ctx.stdin or any(_is_stdin_redirect(c) for c in node.children if c.type in _REDIRECTS)
    if name == "tools":
        _add_call(args, node, _Ctx(ctx.where, stdin), found, line)
        found.direct_calls += wrapped in (None, "time")  # bashkit reads `time` as a keyword
    elif name in _HIDING:
        found.hide(f"line {line}: {_HIDING[name]}, which may call tools the plan cannot see")
    elif name in _SHELLS:
        found.hide(
            f"line {line}: `{name}` runs another shell script (e.g. `{name} -c`), which may call tools "
            "the plan cannot see"
        )
    elif name == "alias" and any((literal_value(a) or "tools=").startswith("tools=") for a in args):
        found.hide(f"line {line} defines an alias that may redefine `tools`")
    elif name in _WRAPPERS:
        _unwrap(name, args, node, ctx, found, line)


def _unwrap(name: str, args: list[Node], node: Node, ctx: _Ctx, found: Scan, line: int) -> None:
    """`command tools …`, `xargs -n1 tools …`, `timeout 5 tools …`: classify the wrapped command."""
    takes_value = _WRAPPERS[name]
    i = 0
    while i < len(args):
        word = literal_value(args[i])
        if word is None:
            found.hide(f"line {line}: `{name}` runs a command whose name is computed, which may be `tools`")
            return
        if name == "command" and word in ("-v", "-V"):
            return  # a lookup, not a call
        if word.startswith("-") and word != "-":
            i += 2 if word in takes_value else 1
        elif (name == "env" and "=" in word) or (name == "timeout" and word[:1].isdigit()):
            i += 1
        else:
            break
    if i >= len(args):
        return
    inner = literal_value(args[i])
    if name == "xargs" and inner == "tools":
        words = [literal_value(a) for a in args[i + 1 :]]
        found.calls.append(ScannedCall([*words, None], False, False, ctx.where, line, _text(node)))
        return
    _classify(inner or "", args[i + 1 :], node, ctx, found, line, wrapped=name)


def _add_call(args: list[Node], node: Node, ctx: _Ctx, found: Scan, line: int) -> None:
    argv = [literal_value(a) for a in args]
    call = ScannedCall(argv, all(w is not None for w in argv), ctx.stdin, ctx.where, line, _text(node))
    found.calls.append(call)
    if (
        argv[:1] == ["scripts"]
        and len(argv) > 1
        and (argv[1] is None or (argv[1] not in _SCRIPTS_VERBS and not argv[1].startswith("-")))
    ):
        found.hide(
            f"line {line} runs a saved script (`tools scripts {argv[1] or '…'}`), whose own calls are not listed",
            saved_run=True,
        )


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", errors="replace")


def syntax_error(script: str) -> str | None:
    """What is wrong with a script's syntax, as bashkit's parser says it (with line and column); None
    when it parses."""
    # lazy: bashkit's parser is needed only by plan and the syntax check
    from bashkit import BashError

    try:
        _analyzer().analyze(script)
    except BashError as e:
        return str(e)
    return None


def _first_error_line(node: Node) -> int:
    while not (node.is_error or node.is_missing):
        child = next((c for c in node.children if c.has_error or c.is_missing), None)
        if child is None:
            break
        node = child
    return node.start_point[0] + 1


def _cross_check(script: str, found: Scan) -> None:
    """Read the script with bashkit's parser too; anything it sees that we did not hides calls."""
    # lazy: bashkit's parser is needed only by plan and the syntax check
    from bashkit import BashError

    try:
        analysis = _analyzer().analyze(script)
    except BashError as e:
        found.hide(f"bashkit cannot parse the script ({e}); it would not run as written")
        return
    theirs = sum(1 for c in analysis.commands if c.name == "tools")
    ours = found.direct_calls
    if theirs > ours:
        found.hide(f"bashkit's parser sees {theirs} `tools` commands where this plan found {ours}")
    # Not `is_opaque`: bashkit also sets it for `$(( $(…) ))`, which tree-sitter reads fine; a
    # computed command name is found above. Re-entry it knows of (and we might not) hides calls.
    if (analysis.has_interpreter_reentry or analysis.truncated) and found.complete:
        found.hide("bashkit's analysis says the script runs text as a script, which may call tools")


_BASH: Any = None


def _analyzer() -> Any:
    global _BASH
    if _BASH is None:
        # lazy: bashkit's parser is needed only by plan and the syntax check
        from bashkit import Bash

        _BASH = Bash()  # analyze() runs nothing and changes no state, so one instance serves every scan
    return _BASH


# --- the plan's JSON ---------------------------------------------------------------------------------

Resolved: TypeAlias = (
    tuple[str, dict[str, Any] | None, Risk] | tuple[str, dict[str, Any] | None, Risk, str | None] | None
)
"""(command, input or None, risk[, the error the call will end with]), or None for a non-call."""
Resolver = Callable[[ScannedCall], Resolved]
AsyncResolver = Callable[[ScannedCall], Awaitable[Resolved]]


def plan_json(found: Scan, resolve: Resolver) -> dict[str, Any]:
    """The `tools plan` output, in the seed's shape.

    Args:
        found: the result of `scan`.
        resolve: turns a call into `(command text, input or None, risk)`: e.g.
            `("tools github list-pulls", {"state": "open"}, Risk("read_only"))`. The input is None when
            it is built at run time. It may return None for a `tools` command that is not a tool
            call (`tools --help`, `tools search …`), which the plan leaves out.

    Returns:
        `{"calls": [{"tool", "input", "risk", "why"?, "where"}, …], "complete": bool}`, plus
        `"reasons"` (why calls may be hidden) when `complete` is False.
    """
    return _plan(found, [resolve(call) for call in found.calls])


async def plan_json_async(found: Scan, resolve: AsyncResolver) -> dict[str, Any]:
    """`plan_json` with an async resolver (one that awaits `Policy.assess`); calls resolve in order."""
    return _plan(found, [await resolve(call) for call in found.calls])


def _plan(found: Scan, resolved: list[Any]) -> dict[str, Any]:
    calls: list[dict[str, Any]] = []
    for call, answer in zip(found.calls, resolved, strict=True):
        if answer is None:
            continue
        command, input, risk, *error = answer
        row: dict[str, Any] = {"tool": command, "input": input, "risk": risk.level}
        if risk.why:
            row["why"] = risk.why
        if risk.tool_risk:
            row["tool_risk"] = risk.tool_risk  # the tool's own level, when its input is built at run time
        row["where"] = call.where
        if error and error[0]:
            row["error"] = error[0]  # what the call will fail with when it runs (a typo, bad input)
        calls.append(row)
    out: dict[str, Any] = {"calls": calls, "complete": found.complete}
    if not found.complete:
        out["reasons"] = list(found.reasons)
    return out
