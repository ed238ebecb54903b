"""`WWW-Authenticate` read in one pass (RFC 9110 §11.6.1), never with a backtracking regex.

A header is what a remote server chose to send: a regex with overlapping quantifiers over 90,000
of its characters takes minutes on the event loop every connection shares. This tokenizer reads
each character once: challenges of `auth-scheme [ token68 / #auth-param ]`, where an auth-param
is `token BWS "=" BWS ( token / quoted-string )` and a quoted-string takes backslash escapes.
Only the first `MAX_HEADER` characters are read; `Challenges.cut` says the rest was ignored.
Text that fits no rule is skipped up to the next comma.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field

import httpx2

MAX_HEADER = 8 * 1024
"""Characters of a `WWW-Authenticate` header that are read; a real one is a few hundred."""

_TCHAR = frozenset(string.ascii_letters + string.digits + "!#$%&'*+-.^_`|~")
_TOKEN68 = frozenset(string.ascii_letters + string.digits + "-._~+/")
_SPACE = frozenset(" \t")
_SEPARATORS = _SPACE | {","}
_READ_BY_THE_SDK = ("error", "scope", "resource_metadata")


@dataclass(frozen=True)
class Challenge:
    """One challenge: its scheme (lower case), a token68 or its parameters (names in lower case)."""

    scheme: str
    params: dict[str, str] = field(default_factory=dict)
    token68: str | None = None


@dataclass(frozen=True)
class Challenges:
    """The challenges of one header, and whether it was longer than `MAX_HEADER`."""

    items: list[Challenge]
    cut: bool = False

    def param(self, name: str, scheme: str = "bearer") -> str | None:
        """A parameter of the first `scheme` challenge that has it (the first one a name appears in)."""
        for challenge in self.items:
            if challenge.scheme == scheme and name in challenge.params:
                return challenge.params[name]
        return None


def parse(header: str | None) -> Challenges:
    """The challenges of a `WWW-Authenticate` value (several headers arrive joined by commas)."""
    if not header:
        return Challenges([])
    return Challenges(_Reader(header[:MAX_HEADER]).challenges(), cut=len(header) > MAX_HEADER)


def quote(value: str) -> str:
    """`value` as a quoted-string (RFC 9110 §5.6.4)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render(challenge: Challenge) -> str:
    """One challenge written back: `Bearer error="invalid_token", scope="a b"`."""
    if challenge.token68 is not None:
        return f"{challenge.scheme} {challenge.token68}"
    params = ", ".join(f"{k}={quote(v)}" for k, v in challenge.params.items())
    return f"{challenge.scheme} {params}" if params else challenge.scheme


ORIGINAL = "toolshell.www_authenticate"
"""The response extension that keeps the header as the server sent it, once `tame` rewrote it."""


def tame(response: httpx2.Response) -> None:
    """Rewrite a response's `WWW-Authenticate` as its parsed Bearer challenge, before the SDK reads it.

    The SDK finds `error`, `scope` and `resource_metadata` with a regex of its own (a literal and
    one character class, so linear). It then reads only what this wrote from the first
    `MAX_HEADER` characters, those three first, so another parameter's value cannot pose as one.
    """
    header = response.headers.get("WWW-Authenticate")
    if header is None or ORIGINAL in response.extensions:
        return
    response.extensions[ORIGINAL] = header
    bearer = next((c for c in parse(header).items if c.scheme == "bearer"), None)
    del response.headers["WWW-Authenticate"]
    if bearer is not None:
        kept = {k: bearer.params[k] for k in (*_READ_BY_THE_SDK, "error_description") if k in bearer.params}
        response.headers["WWW-Authenticate"] = render(Challenge("Bearer", kept, bearer.token68))


def sent_challenge(response: httpx2.Response) -> str | None:
    """The `WWW-Authenticate` header as the server sent it (before any `tame`)."""
    original = response.extensions.get(ORIGINAL)
    return original if isinstance(original, str) else response.headers.get("WWW-Authenticate")


class _Reader:
    """A cursor over the header; every method moves it forward or leaves it where it was."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0

    def _peek(self) -> str:
        return self.text[self.i] if self.i < len(self.text) else ""

    def _skip(self, chars: frozenset[str]) -> None:
        while self.i < len(self.text) and self.text[self.i] in chars:
            self.i += 1

    def _run(self, chars: frozenset[str]) -> str:
        start = self.i
        self._skip(chars)
        return self.text[start : self.i]

    def _skip_past_garbage(self) -> None:
        """To the next comma (or the end): what fits no rule is dropped, and reading goes on."""
        comma = self.text.find(",", self.i)
        self.i = len(self.text) if comma < 0 else comma

    def challenges(self) -> list[Challenge]:
        out: list[Challenge] = []
        while True:
            self._skip(_SEPARATORS)
            if self.i >= len(self.text):
                return out
            scheme = self._run(_TCHAR)
            if not scheme:
                self._skip_past_garbage()
                continue
            params: dict[str, str] = {}
            token68 = None
            if self._peek() in _SPACE:
                self._skip(_SPACE)
                token68 = self._token68()
                if token68 is None:
                    self._params(params)
            out.append(Challenge(scheme.lower(), params, token68))

    def _token68(self) -> str | None:
        """A token68 (`abc+/=`), when that is all the challenge holds; else the cursor stays put."""
        start = self.i
        body = self._run(_TOKEN68)
        self._skip(frozenset("="))
        end = self.i
        self._skip(_SPACE)
        if body and self._peek() in ("", ","):
            return self.text[start:end]
        self.i = start
        return None

    def _params(self, params: dict[str, str]) -> None:
        """`name=value` pairs up to the next challenge: a token not followed by `=` starts one."""
        while True:
            start = self.i
            name = self._run(_TCHAR)
            self._skip(_SPACE)
            if not name or self._peek() != "=":
                self.i = start
                return
            self.i += 1
            self._skip(_SPACE)
            value = self._quoted() if self._peek() == '"' else self._run(_TCHAR)
            params.setdefault(name.lower(), value)
            self._skip(_SPACE)
            if self._peek() != ",":
                self._skip_past_garbage()
            self._skip(_SEPARATORS)

    def _quoted(self) -> str:
        """A quoted-string at the cursor, unescaped; an unterminated one runs to the end."""
        self.i += 1
        out: list[str] = []
        text = self.text
        while self.i < len(text):
            ch = text[self.i]
            if ch == '"':
                self.i += 1
                break
            if ch == "\\" and self.i + 1 < len(text):
                self.i += 1
                ch = text[self.i]
            out.append(ch)
            self.i += 1
        return "".join(out)
