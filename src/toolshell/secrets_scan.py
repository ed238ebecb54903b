"""Finding credentials by their shape in any text: AWS keys, GitHub, GitLab, Slack, OpenAI, Stripe
and other vendors' tokens, JWTs, private keys, passwords in URLs.

The shapes are Yelp's `detect-secrets` (a maintained list, one plugin per vendor): every regex-based
plugin it ships, but the one for public IP addresses (not a credential). Its name-based `Keyword`
plugin and its entropy plugins are not used: names are `redact.secret_name`'s, and entropy alone
flags hashes and ids. The plugins' patterns run on RE2, in linear time, never on Python's
backtracking `re` (what is scanned may come from a server). A pattern RE2 cannot compile is tried
without a trailing `(?!\\w)` boundary (GitLab's), else left out.

A match's span is the credential alone: a plugin's capture group when it holds the value (AWS's
secret key after `aws_secret_access_key = "`, a URL's password), the whole match otherwise, less
the delimiters some patterns take in (quotes, `=`, `:`, spaces); a JWT runs to its last token
character, and a private key from its `-----BEGIN` line to its `-----END … -----` line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

_LEFT_OUT = frozenset({"Public IP (ipv4)"})
_DELIMITERS = " \t\r\n\"'=:"
_JWT_TAIL = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.+/=")
_JWT = "JSON Web Token"
"""detect-secrets' `JwtTokenDetector.secret_type` (its module loads only when a text is scanned)."""
_PRIVATE_KEY = "Private Key"
_NO_SURROGATES = dict.fromkeys(range(55296, 57344), 65533)
"""RE2 reads UTF-8, which has no lone surrogates: each is scanned as one replacement character."""
_MIN_GROUP = 4  # a shorter group is a prefix the pattern names (`(ghp|gho)_…`), not the value


@dataclass(frozen=True)
class Credential:
    """A credential found in a text: `text[start:end]`, and its kind as detect-secrets names it
    (`AWS Access Key`, `GitHub Token`, `Slack Token`, `JSON Web Token`, `Private Key`, …)."""

    start: int
    end: int
    kind: str


def find_credentials(text: str) -> list[Credential]:
    """Every credential shape in `text`, in order of position; overlapping finds are merged into
    the first (a URL's password that is also a token is one credential)."""
    try:
        hit = _any().search(text)
    except UnicodeEncodeError:  # a lone surrogate (a server's broken text): scan it as U+FFFD, spans unchanged
        text = text.translate(_NO_SURROGATES)
        hit = _any().search(text)
    if hit is None:  # one linear pass decides the common case: nothing to find
        return []
    found = sorted(
        (c for kind, pattern, groups in _patterns() for c in _matches(text, kind, pattern, groups)),
        key=lambda c: (c.start, -c.end),
    )
    merged: list[Credential] = []
    for c in found:
        if merged and c.start < merged[-1].end:
            last = merged[-1]
            merged[-1] = Credential(last.start, max(last.end, c.end), last.kind)
        else:
            merged.append(c)
    return merged


def may_hold_credentials(texts: list[str]) -> bool:
    """False when no text of `texts` holds a credential shape, told in one pass over them all.

    The texts are scanned joined by newlines. That is sound: a shape found in one text alone is
    found in the joined text too, since RE2 has no lookaround and the patterns' only context
    assertions (`^`, `$` beside `\\s` in Artifactory's, word boundaries) hold at a newline as they do
    at a text's edge. True means "scan each text": the join can match across two of them."""
    joined = "\n".join(texts)
    try:
        return _any().search(joined) is not None
    except UnicodeEncodeError:  # a lone surrogate: scanned as U+FFFD, as `find_credentials` does
        return _any().search(joined.translate(_NO_SURROGATES)) is not None


def warm() -> None:
    """Load the detector and build its automaton now (0.2–0.4 s), so the first result scanned does
    not pay it: `serve` calls this in a thread as it starts."""
    find_credentials("AKIA warm-up")


def kinds() -> list[str]:
    """The kinds of credential `find_credentials` knows, as detect-secrets names them."""
    return sorted({kind for kind, _, _ in _patterns()})


def _matches(text: str, kind: str, pattern: Any, groups: int) -> Iterator[Credential]:
    for m in pattern.finditer(text):
        start, end = _span(m, groups)
        while start < end and text[start] in _DELIMITERS:
            start += 1
        while end > start and text[end - 1] in _DELIMITERS:
            end -= 1
        if end <= start:
            continue
        if kind == _JWT:
            while end < len(text) and text[end] in _JWT_TAIL:
                end += 1
            if not _jwt_is_valid(text[start:end]):
                continue
        elif kind == _PRIVATE_KEY:
            start, end = _key_block(text, start, end)
        yield Credential(start, end, kind)


def _span(m: Any, groups: int) -> tuple[int, int]:
    spans: list[tuple[int, int]] = [m.span(g) for g in range(1, groups + 1) if m.span(g)[0] >= 0]
    longest = max(spans, key=lambda s: s[1] - s[0], default=None)
    if longest is not None and longest[1] - longest[0] >= _MIN_GROUP:
        return longest
    whole: tuple[int, int] = m.span()
    return whole


def _key_block(text: str, start: int, end: int) -> tuple[int, int]:
    """From the `-----` before `BEGIN … PRIVATE KEY` to the end of the `-----END …-----` after it
    (or the end of the text: a key cut short is still a key)."""
    line_start = text.rfind("\n", 0, start) + 1
    dashes = text.rfind("-----", line_start, start)
    begin = dashes if dashes >= 0 else start
    close = text.find("-----END", end)
    if close < 0:
        return begin, len(text)
    tail = text.find("-----", close + len("-----END"))
    return begin, (tail + 5 if tail >= 0 else len(text))


def _jwt_is_valid(token: str) -> bool:
    # lazy: detect-secrets takes 0.2 s to import (it loads requests); only a scan needs it
    from detect_secrets.plugins.jwt import JwtTokenDetector

    return bool(JwtTokenDetector.is_formally_valid(token))


@cache
def _patterns() -> list[tuple[str, Any, int]]:
    """(kind, RE2 pattern, its number of groups) for every regex-based detect-secrets plugin."""
    # lazy: detect-secrets takes 0.2 s to import (it loads requests); a process that scans nothing never pays it
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.plugins.base import RegexBasedDetector

    out: list[tuple[str, Any, int]] = []
    plugins: dict[str, type[Any]] = get_mapping_from_secret_type_to_class()
    for kind, plugin in sorted(plugins.items()):
        if kind in _LEFT_OUT or not issubclass(plugin, RegexBasedDetector):
            continue
        denylist: Iterable[re.Pattern[str]] = getattr(plugin, "denylist", ())
        for pattern in denylist:
            compiled = _compile(pattern)
            if compiled is not None:
                out.append((kind, compiled, compiled.groups))
    return out


@cache
def _any() -> Any:
    """Every pattern in one RE2 alternation: a text none of them matches is told in one pass."""
    options = re2.Options()
    options.log_errors = False
    options.max_mem = 64 << 20  # the union of ~50 patterns needs more than RE2's default 8 MiB
    options.never_capture = True  # it only tells whether any matches: no group spans to compute
    return re2.compile("|".join(f"(?:{p.pattern})" for _, p, _ in _patterns()), options)


def _compile(pattern: re.Pattern[str]) -> Any:
    flags = "(?i)" if pattern.flags & re.IGNORECASE else ""
    if pattern.flags & re.VERBOSE and any(c.isspace() or c == "#" for c in pattern.pattern):
        return None  # RE2 has no verbose mode; such a pattern would mean something else
    options = re2.Options()
    options.log_errors = False
    for source in (pattern.pattern, pattern.pattern.removesuffix("(?!\\w)")):
        try:
            return re2.compile(flags + source, options)
        except re2.error:
            continue
    return None


__all__ = ["Credential", "find_credentials", "kinds", "may_hold_credentials", "warm"]
