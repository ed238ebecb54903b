"""No Python `re` runs on what a server sends (security issue, item 8).

Python's `re` backtracks: a pattern with overlapping quantifiers over a long hostile string takes
minutes on the event loop every connection shares (a 90,000-character `WWW-Authenticate` took
5 minutes). Server data is read with plain string methods, a small tokenizer
(`connections/auth_params.py`), or RE2 (`re2`, `registry/linear_regex.py`), which is linear.

This walks the source with `ast` and finds every call into `re` (`re.compile`, `re.sub`, ...,
and `from re import`). Each must be listed in `ALLOWED` with why it never sees server data.
"""

from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path

import pytest

from toolshell.connections.bounded_http import blank_line_end
from toolshell.policy.rating import _name_words

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "toolshell"


ALLOWED: dict[tuple[str, str], str] = {
    ("config/names.py", "SERVER_NAME_RE"): "server names as written in the user's config",
    ("store/dialect.py", "_KEY_ON"): "the store's own migration statements, never a server's answer",
    ("config/names.py", "SCRIPT_NAME_RE"): "saved-script names the user or the script chose",
    ("config/oauth.py", "OAuthConfig._names_a_variable"): "an environment variable name in the config",
    ("frontends/serve/tasks/keeper.py", "_PLACE"): "a parked question's key, which toolshell writes (`r1.c3.q7`)",
    ("config/serve.py", "ServeOAuthConfig._an_http_url"): "the issuer URL as written in the user's config",
    ("config/serve.py", "ServeOAuthConfig._names_a_variable"): "an environment variable name in the config",
    ("config/models.py", "GuardConfig._regex_compiles"): "checks that the user's own guardrail pattern compiles",
    ("config/expansion.py", "_VAR_RE"): "`${VAR}` expansion over the user's config text",
    ("config/loading.py", "_BARE_KEY"): "TOML keys of the user's own config, written back by `config import`",
    ("config/trust.py", "_REFERENCE"): "`${VAR}` references in the checkout config a person is about to trust",
    ("policy/words.py", "_GLOB"): "the words of the script's own bash text, never a server's answer",
    ("policy/words.py", "_BRACE"): "the words of the script's own bash text, never a server's answer",
    ("policy/words.py", "_ASSIGN_TILDE"): "the words of the script's own bash text, never a server's answer",
    ("policy/words.py", "_double_quoted"): "the words of the script's own bash text, never a server's answer",
    ("policy/words.py", "_ansi_c"): "the words of the script's own bash text, never a server's answer",
    ("policy/guardrails.py", "RegexGuard.__init__"): (
        "the user's own guardrail pattern, RE2 first; Python's engine only for a pattern RE2 cannot "
        "compile, and then over the input the script sends, not a server's answer"
    ),
    ("frontends/interactive.py", "_HEREDOC"): "what the person types at the interactive prompt",
    ("timeline/events.py", "_SECRET_KEY"): "the keys of the input a script sends to a tool",
    ("host.py", "project_id"): "the user's own .git/config",
    ("redact.py", "_SECRET_PART"): "the names of the config's variables and headers (and of `config import`'s file)",
    ("config/expansion.py", "_FLAG"): "the `args` the user's own config writes (a flag's name, to find secret flags)",
    ("redact.py", "_WORD_BREAK"): "the names of the config's variables and headers (and of `config import`'s file)",
    ("config/lift.py", "_SCHEME"): "header values of the user's own agent-host file, read by `config import`",
    ("config/lift.py", "_NOT_NAME"): "server names of the user's own agent-host file, read by `config import`",
    ("frontends/cli/setup.py", "_NAME"): "the server name the user gives `toolshell setup --name`",
    ("frontends/hosts/files.py", "_INDENT"): "the user's own agent-host file that `toolshell setup` rewrites",
}
"""(module under src/toolshell, where in it) -> why that use never sees server data (or, for the
few still being converted elsewhere, who converts it)."""

RUNS_A_PATTERN = {"compile", "match", "fullmatch", "search", "findall", "finditer", "sub", "subn", "split"}


def _uses(tree: ast.Module) -> list[tuple[str, int]]:
    """(where, line) of each call into `re` and each `from re import`; `where` is the enclosing
    class/function path or the module-level name assigned."""
    found: list[tuple[str, int]] = []
    aliases = {
        a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names if a.name == "re"
    }

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = where
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                inner = f"{where}.{child.name}" if where else child.name
            elif not where and isinstance(child, ast.Assign | ast.AnnAssign):
                targets = child.targets if isinstance(child, ast.Assign) else [child.target]
                inner = ", ".join(ast.unparse(t) for t in targets)
            if isinstance(child, ast.ImportFrom) and child.module == "re":
                found.append((inner or "<module>", child.lineno))
            if (
                isinstance(child, ast.Call)
                and isinstance(child.func, ast.Attribute)
                and isinstance(child.func.value, ast.Name)
                and child.func.value.id in aliases
                and child.func.attr in RUNS_A_PATTERN
            ):
                found.append((inner or "<module>", child.lineno))
            visit(child, inner)

    visit(tree, "")
    return found


def _all_uses() -> dict[tuple[str, str], list[int]]:
    uses: dict[tuple[str, str], list[int]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        for where, line in _uses(ast.parse(path.read_text(), str(path))):
            uses.setdefault((rel, where), []).append(line)
    return uses


def test_every_use_of_pythons_regex_engine_is_allowed_with_a_reason_it_never_sees_server_data() -> None:
    unlisted = {
        f"{rel}:{lines[0]} ({where})" for (rel, where), lines in _all_uses().items() if (rel, where) not in ALLOWED
    }
    assert not unlisted, (
        "Python's backtracking `re` where server data may flow; use string methods, "
        "connections/auth_params.py or re2, or add the use to ALLOWED with why it never sees server data: "
        + ", ".join(sorted(unlisted))
    )


def test_the_allowlist_names_only_uses_that_still_exist() -> None:
    stale = set(ALLOWED) - set(_all_uses())
    assert not stale, f"ALLOWED entries with no `re` use left (remove them): {sorted(stale)}"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import re\nX = re.compile('a+')\n", [("X", 2)]),
        ("import re as rx\ndef f(s):\n    return rx.sub('a', '', s)\n", [("f", 3)]),
        ("from re import search\n", [("<module>", 1)]),
        ("import re\nclass C:\n    def m(self, s):\n        return re.findall('x', s)\n", [("C.m", 4)]),
        ("import re2\nX = re2.compile('a+')\ntry:\n    pass\nexcept re.error:\n    pass\n", []),
    ],
)
def test_the_walk_finds_each_call_into_re_and_names_where_it_is(source: str, expected: list[tuple[str, int]]) -> None:
    assert _uses(ast.parse(source)) == expected


def _strings(alphabet: str, longest: int) -> list[str]:
    return ["".join(p) for n in range(longest + 1) for p in itertools.product(alphabet, repeat=n)]


def test_the_end_of_an_sse_event_is_found_where_the_pattern_it_replaces_found_it() -> None:
    old = re.compile(rb"(?:\r\n|\n|\r(?!\n))(?:\r\n|\n|\r)")
    for text in _strings("\r\nx", 7):
        buf = bytearray(text.encode())
        for start in range(len(buf) + 1):
            m = old.search(buf, start)
            assert blank_line_end(buf, start) == (m.end() if m else None), (buf, start)


def test_a_tool_name_splits_into_the_words_the_pattern_it_replaces_found() -> None:
    camel = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
    for name in _strings("aZ9_.- \u00e9", 5):
        old = [w.lower() for w in re.split(r"[_\-\s.]+", camel.sub("_", name)) if w]
        assert _name_words(name) == old, name
