"""The bounded answer of a shell call: what its stdout and stderr become past `max_output_bytes`.

Inside the shell a `tools` result is whole (up to `max_result_bytes`); only what the shell call
returns to the model is capped. Past the cap the answer keeps the head and the tail (40/60), with
one marker line naming what was left out and the file, in the session's shell, that holds the whole
output. When the whole stdout is one JSON document it is cut so that it stays valid JSON instead
(`shell.json_cut`), and the marker goes to stderr. Pure: collecting, cutting and the too-big error;
the files are written by `shell.bash.OutputFiles`.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from toolshell.errors import ErrorCode, ToolshellError
from toolshell.shell.json_cut import cut_json, parse_document

HEAD_SHARE = 0.4
"""The part of the cap given to the head; the tail, which carries the last lines and the exit
status, gets the rest."""
SHELL_OUTPUT_LIMIT = 10 * 1024 * 1024
"""bashkit keeps at most this much of one shell call's stdout (and of its stderr); the rest is lost
(bashkit 0.20.1 has no setting for it, and its byte sinks and pipes into a command stop there too)."""
SHELL_CUT = (
    f"[the shell stopped collecting this output at {SHELL_OUTPUT_LIMIT:,} bytes: the script printed more, "
    "and the rest of it, its last lines too, is lost; print less (filter with grep, jq or tail in the script)]\n"
)
"""The last line of a stream bashkit cut: its end is not the script's."""
_PAGING_PARTS = ("limit", "page", "cursor", "offset", "query", "filter", "fields", "select", "since", "until")
"""Input property names that ask a server for less (matched by string search: names come from it)."""


def _pages(name: str) -> bool:
    low = name.lower()
    return any(p in low for p in _PAGING_PARTS) or low.startswith("max") or low in ("top", "first")


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _head_bytes(text: str, n: int) -> str:
    """The longest prefix of `text` of at most `n` UTF-8 bytes (never splits a character)."""
    return text.encode("utf-8", "surrogatepass")[: max(n, 0)].decode("utf-8", "ignore")


def _tail_bytes(text: str, n: int) -> str:
    raw = text.encode("utf-8", "surrogatepass")
    return raw[max(len(raw) - n, 0) :].decode("utf-8", "ignore") if n > 0 else ""


@dataclass(frozen=True)
class Collected:
    """One stream of a shell call as collected: its first bytes, its last bytes, and counts.

    `head + tail` is the whole stream when `left_out` is 0; else `left_out` bytes between them
    were counted but not kept (bounded memory).
    """

    head: str
    tail: str = ""
    left_out: int = 0
    lines: int = 0
    shell_cut: bool = False
    """bashkit itself dropped the stream past `SHELL_OUTPUT_LIMIT`."""

    @classmethod
    def of(cls, text: str) -> Collected:
        return cls(text, "", 0, text.count("\n"))

    @property
    def size(self) -> int:
        return _size(self.head) + self.left_out + _size(self.tail)

    @property
    def whole(self) -> str | None:
        return self.head + self.tail if not self.left_out else None

    @property
    def end(self) -> str:
        """The last part kept: where a run's closing notes are read and appended."""
        return self.tail if self.left_out else self.head

    def with_end(self, end: str) -> Collected:
        """The same stream with its `end` replaced (a note appended, a suffix taken off)."""
        if not self.left_out:
            return Collected(end, "", 0, end.count("\n"), self.shell_cut)
        lines = self.lines - self.tail.count("\n") + end.count("\n")
        return Collected(self.head, end, self.left_out, lines, self.shell_cut)

    def saved_text(self) -> str:
        """What the output file holds: the whole stream, or what was kept of it, saying so."""
        if self.whole is not None and not self.shell_cut:
            return self.whole
        ending = f"\n{SHELL_CUT}" if self.shell_cut else ""
        if self.whole is not None:
            return f"{self.whole}{ending}"
        return f"{self.head}\n[… {self.left_out:,} bytes not kept …]\n{self.tail}{ending}"


class Collector:
    """Collects one stream from bashkit's synchronous `on_output` callback in bounded memory:
    the first `keep` bytes and the last `tail` bytes; the middle is only counted."""

    def __init__(self, keep: int, tail: int) -> None:
        self.keep, self.tail_keep = keep, tail
        self._head: list[str] = []
        self._head_size = 0
        self._tail: deque[str] = deque()
        self._tail_size = 0
        self._left_out = 0
        self._lines = 0

    def add(self, text: str) -> None:
        if not text:
            return
        self._lines += text.count("\n")
        room = self.keep - self._head_size
        if room > 0:
            part = _head_bytes(text, room)
            self._head.append(part)
            self._head_size += _size(part)
            text = text[len(part) :]
            if not text:
                return
            self._head_size = self.keep  # the head is full: from here on only the tail is kept
        self._tail.append(text)
        self._tail_size += _size(text)
        self._trim_tail()

    def _trim_tail(self) -> None:
        while self._tail_size > self.tail_keep and self._tail:
            first = self._tail.popleft()
            n = _size(first)
            over = self._tail_size - self.tail_keep
            if n > over:  # keep the end of this chunk
                rest = _tail_bytes(first, n - over)
                self._tail.appendleft(rest)
                n -= _size(rest)
            self._tail_size -= n
            self._left_out += n

    def collected(self) -> Collected:
        return Collected("".join(self._head), "".join(self._tail), self._left_out, self._lines)


@dataclass(frozen=True)
class Bounded:
    """A stream as the shell call returns it; `note` (for stderr) when stdout was cut as JSON."""

    text: str
    note: str = ""


def bound(stream: Collected, max_bytes: int, where: str, *, as_json: bool = False) -> Bounded:
    """`stream` within `max_bytes` UTF-8 bytes.

    A stream bashkit cut (`shell_cut`) ends with `SHELL_CUT`, since its tail is not the script's.

    Args:
        stream: the collected stream.
        max_bytes: the cap (at least a few hundred bytes, so the markers fit).
        where: what the marker says about the whole output, e.g. `the whole output is in /home/…`.
        as_json: try the JSON cut first (stdout) when the stream is one JSON document.
    """
    whole = stream.whole
    if whole is not None and not stream.shell_cut and _size(whole) <= max_bytes:
        return Bounded(whole)
    if as_json and whole is not None and not stream.shell_cut and (cut := _json_cut(whole, max_bytes)) is not None:
        note = f"[stdout cut: one JSON document of {stream.size:,} bytes, cut so it stays valid JSON; {where}]\n"
        return Bounded(cut, note)
    if stream.shell_cut:  # its last line may be cut short: the note goes on a line of its own
        text = _head_and_tail(stream, max_bytes - _size(SHELL_CUT) - 1, where)
        newline = "" if text.endswith("\n") else "\n"
        return Bounded(f"{text}{newline}{SHELL_CUT}")
    return Bounded(_head_and_tail(stream, max_bytes, where))


def _json_cut(text: str, max_bytes: int) -> str | None:
    parsed = parse_document(text)
    if parsed is None:
        return None
    newline = "\n" if text.endswith("\n") else ""
    cut = cut_json(parsed[0], max_bytes - len(newline), parsed[1])
    return None if cut is None else cut + newline


def _head_and_tail(stream: Collected, max_bytes: int, where: str) -> str:
    whole = stream.whole
    first = stream.head if whole is None else whole
    last = stream.tail if whole is None else whole
    widest = _marker(stream.size, stream.lines, where)  # the real counts are smaller: it fits
    room = max(max_bytes - _size(widest) - 1, 0)
    head = _snap_head(_head_bytes(first, int(room * HEAD_SHARE)))
    tail = _snap_tail(_tail_bytes(last, room - _size(head)))
    dropped = stream.size - _size(head) - _size(tail)
    lines = max(stream.lines - head.count("\n") - tail.count("\n"), 0)
    sep = "" if not head or head.endswith("\n") else "\n"
    return f"{head}{sep}{_marker(dropped, lines, where)}{tail}"


def _marker(dropped: int, lines: int, where: str) -> str:
    return f"[output cut: {dropped:,} bytes dropped ({lines:,} lines); {where}]\n"


def _snap_head(head: str) -> str:
    """End the head at a line break when one is in its second half."""
    i = head.rfind("\n")
    return head[: i + 1] if i >= len(head) // 2 else head


def _snap_tail(tail: str) -> str:
    """Start the tail at a line when a line break is in its first half."""
    i = tail.find("\n")
    return tail[i + 1 :] if 0 <= i < len(tail) // 2 else tail


def where_saved(path: str | None, why_not: str = "", *, kept: int | None = None) -> str:
    """The marker's words about the output file: `kept` is set when it holds only the first bytes."""
    if path is None:
        return f"the whole output could not be saved ({why_not}); print less, or filter with grep or jq"
    if kept is None:
        return f"the whole output is in {path}"
    return f"only its first {kept:,} bytes were kept; they are in {path}"


def too_big(command: str, size: int, limit: int, input_schema: dict[str, Any]) -> ToolshellError:
    """The `tool_error` of a result past `max_result_bytes`: it says how to ask the server for less."""
    props = input_schema.get("properties") if isinstance(input_schema, dict) else None
    names = sorted(n for n in (props if isinstance(props, dict) else {}) if _pages(n))
    if names:
        how = f"ask the server for less with {', '.join(names)} (see `{command} --help`)"
    else:
        how = f"ask for a narrower input (see `{command} --help`) or raise [tools_in_shell] max_result_bytes"
    return ToolshellError(
        ErrorCode.TOOL_ERROR,
        f"the result of {command} is {size:,} bytes, past the shell's limit of {limit:,} bytes "
        f"([tools_in_shell] max_result_bytes); {how}",
    )
