"""Ratings: does a tool that declares nothing about its risk change things outside the session?

A rating only ever adds a question (see `risk.judge`), so every doubt resolves to `"changes"`:
a tool the heuristic cannot read, and a rater that fails, both rate `"changes"`.

`Ratings` asks a `Rater` once per (server, program, tool, input-schema hash) and keeps the answer in
SQLite, so a script's hundredth call to a tool costs one indexed lookup. The program is the server's
identity (`ToolEntry.server_id`): another program configured under the same name is rated afresh.
Ratings stored before they recorded the program are dropped when the store is opened (a rating
only ever adds a question, so rating those tools once more loses nothing).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal, Protocol

import anyio

from toolshell.config import ApprovalConfig
from toolshell.errors import ConfigError
from toolshell.policy.canonical import schema_hash, server_key
from toolshell.policy.risk import is_unlabeled
from toolshell.policy.words_compute import COMPUTE_VERBS, COMPUTE_WORDS, TARGET_WORDS
from toolshell.registry.entry import ToolEntry
from toolshell.store.protocol import StateStore

Rating = Literal["changes", "read_only"]
log = logging.getLogger(__name__)


class Rater(Protocol):
    """Rates one unlabeled tool. May raise; `Ratings` then treats the tool as `"changes"`."""

    async def rate(self, entry: ToolEntry) -> Rating: ...


class RaterFailed(Exception):
    """A rater could not give an answer (the program failed, timed out, or printed nonsense)."""


# --- the offline heuristic -----------------------------------------------------------------------

CHANGE_VERBS = frozenset(
    "create update delete remove write send post put patch set add merge push move rename drop kill execute "
    "exec run insert upsert edit modify replace append publish upload archive close reopen cancel approve "
    "assign unassign label comment reply invite ban revoke grant transfer pay charge refund deploy install "
    "uninstall start stop restart reset clear purge destroy truncate commit apply submit save store "
    "mark enable disable lock unlock block unblock subscribe unsubscribe fork star unstar trigger dispatch "
    "schedule book order sign mutate overwrite erase wipe terminate shutdown reboot".split()
)
READ_VERBS = frozenset(
    "get list read search find show fetch describe count query lookup look view inspect check status "
    "browse download export preview diff log stat info summarize summarise explain validate lint "
    "calculate compute convert format parse render echo ping whoami resolve match compare".split()
)
_READ_ONLY_PHRASES = (
    "read-only",
    "read only",
    "readonly",
    "does not modify",
    "without modifying",
    "no side effects",
    "does not change",
    "never modifies",
)
# Names and descriptions come from the server: words are split by plain string code, in one pass.


def _ascii_words(text: str) -> list[str]:
    """The runs of a-z in `text`."""
    return "".join(ch if "a" <= ch <= "z" else " " for ch in text).split()


def _name_words(name: str) -> list[str]:
    """`createIssue` / `create_issue` / `create-issue.v2` -> `create`, `issue` (, `v2`), lower case."""
    out: list[str] = []
    prev = ""
    for ch in name:
        if ch in "_-." or ch.isspace():
            ch = " "
        elif "A" <= ch <= "Z" and ("a" <= prev <= "z" or "0" <= prev <= "9"):
            out.append(" ")
        out.append(ch)
        prev = ch
    return "".join(out).lower().split()


def _stem(word: str) -> str:
    """`deletes` / `deleted` / `deleting` -> `delete`; enough for verbs in tool descriptions."""
    for suffix, repl in (("ies", "y"), ("ing", ""), ("ing", "e"), ("ed", ""), ("ed", "e"), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) > len(suffix) + 2:
            base = word[: -len(suffix)] + repl
            if base in CHANGE_VERBS or base in READ_VERBS:
                return base
    return word


def _schema_words(schema: dict[str, object]) -> list[str]:
    props = schema.get("properties")
    return [w for key in props for w in _name_words(str(key))] if isinstance(props, dict) else []


def heuristic_rating(entry: ToolEntry) -> Rating:
    """Rate a tool by its words (`heuristic_reason` says which rule decided)."""
    return heuristic_reason(entry)[0]


def heuristic_reason(entry: ToolEntry) -> tuple[Rating, str]:
    """Rate a tool by its words, and say why. The rule, first match wins:

    1. pure computation: every word of its name and description is about computing on the given
       input (`add`, "Add two integers.", `format_date`, `celsius_to_fahrenheit`), and every input
       is a plain value (number, string, boolean, or a list of them) that names no target (no
       path, URL, id, …) -> read_only;
    2. a change verb in the tool's name (`create_issue`, `deleteFile`, `git_push`) -> changes;
    3. a read verb in its name (`list_pulls`, `getUser`, `search_docs`) -> read_only;
    4. the description says it is read-only ("read-only", "does not modify", ...) -> read_only;
    5. a change verb in the description or the input property names -> changes;
    6. a read verb in the description -> read_only;
    7. nothing tells -> changes (a rating may only add a question, never remove one).
    """
    name = _name_words(entry.name)
    if computes_only(entry):
        return "read_only", "pure computation on its input (its name, description and inputs say nothing else)"
    if verb := next((w for w in name if w in CHANGE_VERBS), None):
        return "changes", f"its name has the change verb {verb!r}"
    if verb := next((w for w in name if w in READ_VERBS), None):
        return "read_only", f"its name has the read verb {verb!r}"
    text = entry.description.lower()
    if phrase := next((p for p in _READ_ONLY_PHRASES if p in text), None):
        return "read_only", f"its description says {phrase!r}"
    described = [_stem(w) for w in _ascii_words(text)]
    if verb := next((w for w in described + _schema_words(entry.input_schema) if w in CHANGE_VERBS), None):
        return "changes", f"its description or inputs have the change verb {verb!r}"
    if verb := next((w for w in described if w in READ_VERBS), None):
        return "read_only", f"its description has the read verb {verb!r}"
    return "changes", "nothing in its name, description or inputs tells (every doubt asks)"


def computes_only(entry: ToolEntry) -> bool:
    """True when the tool reads as pure computation on its input (arithmetic, formatting,
    conversion): its name and description use only the words in `policy.words_compute`, and its
    inputs are plain values none of whose names points at something outside (a path, a URL, an id)."""
    name = _name_words(entry.name)
    described = [_stem(w) for w in _ascii_words(entry.description.lower())]
    if not any(w in COMPUTE_VERBS for w in name):
        return False
    if not all(w in COMPUTE_WORDS for w in name + described):
        return False
    props = entry.input_schema.get("properties") if isinstance(entry.input_schema, dict) else None
    if not isinstance(props, dict):
        return props is None
    return all(_plain_value(p) and not (set(_name_words(str(k))) & TARGET_WORDS) for k, p in props.items())


def _plain_value(prop: object) -> bool:
    if not isinstance(prop, dict):
        return False
    kind = prop.get("type")
    if kind == "array":
        return _plain_value(prop.get("items", {"type": "string"}))
    kinds = kind if isinstance(kind, list) else [kind]
    return bool(kinds) and all(k in _PLAIN_TYPES for k in kinds)


_PLAIN_TYPES = frozenset({"number", "integer", "string", "boolean", "null"})


def read_action(entry: ToolEntry, input: dict[str, object]) -> str | None:
    """The read verb a call's `action` names (`tools runtime mcp action=list` -> "list"), when the
    tool is one that says which action it takes and the rest of its risk is declared: a trusted tool
    that declares itself neither destructive nor open-world, with an `action` enum in its schema.
    None otherwise. Such a call only reads, whatever the tool's other actions do."""
    hints = entry.annotations
    if not entry.trusted or hints.get("destructiveHint") is not False or hints.get("openWorldHint") is not False:
        return None
    props = entry.input_schema.get("properties")
    spec = props.get("action") if isinstance(props, dict) else None
    allowed = spec.get("enum") if isinstance(spec, dict) else None
    action = input.get("action")
    if not isinstance(allowed, list) or not isinstance(action, str) or action not in allowed:
        return None
    words = _name_words(action)
    return action if words and words[0] in READ_VERBS else None


class HeuristicRater:
    """The offline rater: `heuristic_rating` on the tool's name, description and schema words."""

    async def rate(self, entry: ToolEntry) -> Rating:
        return heuristic_rating(entry)


# --- other raters ----------------------------------------------------------------------------------


def parse_rating(text: str) -> Rating:
    """Read a rater's answer: `changes` / `read_only` (or `read-only`), bare or as `{"rating": ...}`.

    Raises:
        RaterFailed: the text is neither.
    """
    answer: object = text.strip()
    if isinstance(answer, str) and answer.startswith("{"):
        try:
            answer = json.loads(answer).get("rating")
        except (json.JSONDecodeError, AttributeError):
            raise RaterFailed(f'the rater printed JSON without a usable "rating": {text[:200]!r}') from None
    if isinstance(answer, str) and answer.strip().lower().replace("-", "_") in ("changes", "read_only"):
        return "changes" if answer.strip().lower() == "changes" else "read_only"
    raise RaterFailed(f'the rater printed {text[:200]!r}; it must print `changes`, `read_only` or {{"rating": …}}')


def tool_json(entry: ToolEntry) -> dict[str, object]:
    """What a rater is told about a tool."""
    return {
        "server": entry.server,
        "name": entry.name,
        "description": entry.description,
        "input_schema": entry.input_schema,
    }


class CommandRater:
    """Runs `argv` with the tool as JSON on stdin (`{"server","name","description","input_schema"}`)
    and reads `changes` / `read_only` or `{"rating": ...}` from its stdout.

    A non-zero exit, a timeout, a missing program or an unreadable answer raises `RaterFailed`,
    which `Ratings` turns into `"changes"`.
    """

    def __init__(self, argv: Sequence[str], *, timeout_seconds: float = 30.0) -> None:
        if not argv:
            raise ValueError('CommandRater needs a program, e.g. rater_command = ["python", "rate.py"]')
        self.argv = list(argv)
        self.timeout_seconds = timeout_seconds

    async def rate(self, entry: ToolEntry) -> Rating:
        data = json.dumps(tool_json(entry)).encode()
        try:
            with anyio.fail_after(self.timeout_seconds):
                done = await anyio.run_process(self.argv, input=data, check=False)
        except TimeoutError:
            raise RaterFailed(f"{self.argv[0]} gave no rating within {self.timeout_seconds:g} s") from None
        except OSError as e:
            raise RaterFailed(f"cannot run the rater {self.argv[0]!r}: {e.strerror or e}") from None
        if done.returncode != 0:
            tail = done.stderr.decode(errors="replace").strip()[-300:]
            raise RaterFailed(f"the rater {self.argv[0]!r} exited with {done.returncode}: {tail}")
        return parse_rating(done.stdout.decode(errors="replace"))


class CallableRater:
    """Wraps a function `fn(entry) -> "changes" | "read_only"` (sync or async) as a `Rater`.

    The answer is read like a command rater's, so a function may also return `{"rating": …}` text.
    """

    def __init__(self, fn: Callable[[ToolEntry], str | Awaitable[str]]) -> None:
        self.fn = fn

    async def rate(self, entry: ToolEntry) -> Rating:
        answer = self.fn(entry)
        if not isinstance(answer, str):
            answer = await answer
        return parse_rating(answer)


def make_rater(approval: ApprovalConfig) -> Rater | None:
    """The rater `[approval] rater` names: `heuristic` (default), `command` (`rater_command`), `none`.

    Raises:
        ConfigError: `rater = "command"` without a `rater_command`.
    """
    if approval.rater == "none":
        return None
    if approval.rater == "command":
        if not approval.rater_command:
            raise ConfigError(
                [
                    (
                        "approval.rater_command",
                        'rater = "command" needs the program to run, e.g. rater_command = ["python", "rate.py"]',
                    )
                ]
            )
        return CommandRater(approval.rater_command)
    return HeuristicRater()


# --- stored ratings --------------------------------------------------------------------------------

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tool_ratings (
    server TEXT NOT NULL,
    server_id TEXT NOT NULL,        -- the program serving the tool (`ToolEntry.server_id`)
    tool TEXT NOT NULL,
    schema_hash TEXT NOT NULL,
    rating TEXT NOT NULL,
    rated_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (server, server_id, tool, schema_hash)
);
"""
RatingKey = tuple[str, str, str, str]


class Ratings:
    """Stored ratings of unlabeled tools.

    Args:
        store: where ratings are kept (table `ratings`).
        rater: who is asked about a tool not yet rated.
        enabled: `[tools_in_shell] rate_unlabeled_tools`; False makes `get` return None.
    """

    def __init__(self, store: StateStore, rater: Rater, *, enabled: bool = True) -> None:
        self.store = store
        self.rater = rater
        self.enabled = enabled
        self._failed: set[RatingKey] = set()
        self._lock = anyio.Lock()
        # `tool_ratings` records the program; the older `ratings` table did not, so its tools are rated again.
        store.migrate("ratings", [_SCHEMA])

    async def get(self, entry: ToolEntry) -> Rating | None:
        """The tool's rating, asking the rater the first time; None for a tool that is not rated.

        Labeled trusted tools are never rated. A rater that fails rates `"changes"`; that answer is
        not stored, and the rater is not asked about that tool again by this `Ratings` (a broken
        rater must not cost every call a timeout).
        """
        if not self.enabled or not is_unlabeled(entry):
            return None
        key = (server_key(entry), entry.server_id, entry.name, schema_hash(entry))
        if stored := await anyio.to_thread.run_sync(self._stored, key):  # rated before: no lock to wait on
            return stored
        async with self._lock:  # two concurrent calls to a new tool rate it once
            if stored := await anyio.to_thread.run_sync(self._stored, key):
                return stored
            if key in self._failed:
                return "changes"
            try:
                rating = await self.rater.rate(entry)
                rating = parse_rating(rating)
            except Exception as e:  # any failure of a rater means "changes": a rating only adds questions
                log.warning("rating %s failed, treating it as changing things: %s", entry.command, e)
                self._failed.add(key)
                return "changes"
            await anyio.to_thread.run_sync(self._store, key, rating)
            return rating

    def _store(self, key: RatingKey, rating: str) -> None:
        self.store.execute(
            "INSERT INTO tool_ratings (server, server_id, tool, schema_hash, rating, rated_at) "
            "VALUES (?,?,?,?,?,?) ON CONFLICT (server, server_id, tool, schema_hash) "
            "DO UPDATE SET rating = excluded.rating, rated_at = excluded.rated_at",
            (*key, rating, time.time()),
        )

    async def explain(self, entry: ToolEntry) -> tuple[Rating, str] | None:
        """The tool's rating and why (None for a tool that is not rated), for `toolshell servers`:
        a server author reads which rule decided, and which annotation would say it instead."""
        rating = await self.get(entry)
        if rating is None:
            return None
        if isinstance(self.rater, HeuristicRater):
            said, why = heuristic_reason(entry)
            return rating, why if said == rating else "rated so earlier (stored)"
        return rating, f"the configured rater ({type(self.rater).__name__}) said so"

    def _stored(self, key: RatingKey) -> Rating | None:
        rows = self.store.query(
            "SELECT rating FROM tool_ratings WHERE server=? AND server_id=? AND tool=? AND schema_hash=?", key
        )
        return rows[0]["rating"] if rows else None
