"""Classify a `tools …` argv into one request, before any catalog lookup.

The verbs are fixed words: `--help`/`-h`/`help`, `search`, `plan` and `scripts`. They win over a
server of the same name (a server called `search` is still reachable through `tools --help` and
calls via its tools' flat names, but `tools search …` always searches). Everything else is a call;
how many of its words name the tool is for the catalog to decide.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from toolshell.errors import ErrorCode, ToolshellError

HELP_WORDS = frozenset({"--help", "-h"})
VERBS = ("help", "search", "plan", "scripts")


@dataclass(frozen=True)
class Help:
    """Show help. `target` is the words naming what: `[]` (everything), a server, or a tool."""

    target: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Search:
    """`tools search <words>`: the words joined by single spaces."""

    query: str


@dataclass(frozen=True)
class Plan:
    """`tools plan`: the script comes on stdin."""


@dataclass(frozen=True)
class Scripts:
    """`tools scripts …`: everything after `scripts`, for the saved-scripts command to parse."""

    args: list[str]


@dataclass(frozen=True)
class Invoke:
    """A call: the tool's name words followed by its input arguments."""

    argv: list[str]


Request = Help | Search | Plan | Scripts | Invoke


def parse(argv: list[str]) -> Request:
    """Classify the arguments of one `tools` command.

    Args:
        argv: The words after `tools`.

    Returns:
        The request. `tools X --help` and `tools X Y --help` give `Help` with the leading name
        words (`["X"]`, `["X", "Y"]`); input arguments written before `--help` are ignored.
        `tools scripts …` passes everything on untouched, `--help` included, so saved scripts
        can answer their own help.

    Raises:
        ToolshellError: `invalid_input` for `tools search` without words or `tools plan` with
            arguments.
    """
    if not argv:
        return Help([])
    verb, rest = argv[0], argv[1:]
    if verb in HELP_WORDS or verb == "help":
        return Help(_name_words(rest))
    if verb == "scripts":
        return Scripts(list(rest))
    if verb == "search":
        return _search(rest)
    if verb == "plan":
        return _plan(rest)
    at = _help_position(argv)
    if at is not None:
        return Help(_name_words(argv[:at]))
    return Invoke(list(argv))


def _search(words: list[str]) -> Request:
    if any(w in HELP_WORDS for w in words):
        return Help(["search"])
    query = " ".join(w.strip() for w in words if w.strip())
    if not query:
        raise ToolshellError(
            ErrorCode.INVALID_INPUT,
            "tools search needs words to look for: tools search <words>, e.g. tools search pull request",
        )
    return Search(query)


def _plan(rest: list[str]) -> Request:
    if not rest:
        return Plan()
    if len(rest) == 1 and rest[0] in HELP_WORDS:
        return Help(["plan"])
    raise ToolshellError(
        ErrorCode.INVALID_INPUT,
        f"tools plan takes no arguments (got {rest[0]!r}); pass the script on stdin: tools plan <<'EOF' … EOF",
    )


def _help_position(argv: list[str]) -> int | None:
    """Index of a `--help`/`-h` that asks for help, or None.

    `-h` right after a bare `--key` is that key's value (`--title -h`), the same way the input
    rules read it; `--help` never is, because a `--word` after `--key` makes `--key` a flag.
    """
    for i, word in enumerate(argv):
        if word == "--help":
            return i
        if word == "-h" and not (i and _is_bare_flag(argv[i - 1])):
            return i
    return None


def _is_bare_flag(word: str) -> bool:
    return word.startswith("--") and len(word) > 2 and "=" not in word


def _name_words(words: list[str]) -> list[str]:
    """The leading words that can be names: up to the first input-looking argument."""
    names: list[str] = []
    for word in words:
        if not word or word[0] in "-{[" or "=" in word:
            break
        names.append(word)
    return names
