"""Keeping secrets out of what scripts, logs and errors show.

Which configured values are secrets (`config.loading` collects them): a `${VAR}` expansion whose
variable's name says so (`secret_name`: TOKEN, SECRET, PASSWORD, PASSWD, CREDENTIAL, COOKIE, PRIVATE
anywhere in it, or KEY, APIKEY, AUTH, OAUTH, AUTHORIZATION, SESSION, PAT, PASS, PASSPHRASE, PWD,
DSN, JWT, BEARER as a word of it), every expansion in a server's `headers`, the password and query
values of an expanded URL, the value after a secret-named flag in `args` (`--token=${X}`), the value
of every variable a `*_env` setting names (OAuth client secrets and keys, webhook tokens, the state
key ring) and of every variable listed in the top-level `secret_env`. Paths, repository names and
other settings are not secrets and show as they are. `Redactor` replaces each secret with `***` in
any text; the host applies it to every `tools` output, the shell call's result, diagnostics,
timeline previews and log records.

A server that knows a secret can send it in another form, so each secret is masked in the forms
text and files commonly carry it (`forms_of`): with `_` written `-` (a tool's name as scripts write
it and the `bash` description lists it: `tools srv get-x`), reversed, base64 and base64url at each
of the three alignments a secret can have inside a longer base64 stream, hex, percent-encoding and
JSON string escaping. All forms of all secrets are one RE2 alternation of literals, built once, matched in one
linear pass over the UTF-8 bytes (no backtracking `re` on what a server sends), and a second one
with the line breaks taken out (base64 and hex wrapped at a fixed width). `pieces` masks a secret
split across several strings (the blocks of one result), `blob` masks binary data.
Transformations beyond these (a secret cut in two and reordered, compressed, encrypted, or
encoded twice) cannot be recognised.
"""

from __future__ import annotations

import base64
import json
import logging
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from urllib.parse import quote, quote_plus

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

from toolshell.safe_text import HIDDEN

MASK = "***"
MIN_LENGTH = 6
_SECRET_PART = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|COOKIE|PRIVATE", re.IGNORECASE)
"""Words that name a secret wherever they stand in a name (`GITHUB_TOKEN`, `DBPASSWORD`)."""
_SECRET_WORDS = frozenset(
    {"KEY", "KEYS", "APIKEY", "AUTH", "OAUTH", "AUTHORIZATION", "SESSION", "SESSIONID"}
    | {"PAT", "PASS", "PASSPHRASE", "PWD", "DSN", "JWT", "BEARER"}
)
"""Words that name a secret only as a whole word (`API_KEY`, `X-Auth`, `GH_PAT`, `DB_PASS`,
`SENTRY_DSN`; not `MONKEY`, `AUTHOR`, `PATH`, `COMPASS`)."""
_NOT_SECRET = frozenset({"PWD"})
"""Names that are a secret word alone yet hold no secret: the shell's working directory."""
_WORD_BREAK = re.compile(r"[^A-Za-z]+|(?<=[a-z])(?=[A-Z])")
MEMO_SIZE = 256
MEMO_TEXT = 1024
"""`Redactor.__call__` remembers up to `MEMO_SIZE` texts of at most `MEMO_TEXT` characters."""
_OPTIONS = re2.Options()
_OPTIONS.encoding = re2.Options.Encoding.LATIN1  # byte semantics: blobs need not be UTF-8
_OPTIONS.never_capture = True
_OPTIONS.log_errors = False
_OPTIONS.max_mem = 64 << 20  # the DFA of many long literals; RE2's default (8 MiB) is tight


def is_secret(name: str, value: str) -> bool:
    """Whether the value of `${name}` must never be shown: a non-empty one under a secret name."""
    return bool(value) and secret_name(name)


def secret_name(name: str) -> bool:
    """Whether a variable or header name says it holds a secret (see the module's rule). Words
    break at anything but a letter and where lower case meets upper (`apiKey`)."""
    if _SECRET_PART.search(name):
        return True
    if name.upper() in _NOT_SECRET:
        return False
    return any(word.upper() in _SECRET_WORDS for word in _WORD_BREAK.split(name))


def forms_of(secret: str) -> set[bytes]:
    """The secret and the encoded forms of it that are masked too, as UTF-8 bytes.

    An encoded form shorter than `MIN_LENGTH` is left out: it would mask ordinary text.
    """
    raw = secret.encode("utf-8", "surrogatepass")
    texts = {secret[::-1], secret.replace("_", "-"), *_json_forms(secret), *_url_forms(secret)}
    forms = {t.encode("utf-8", "surrogatepass") for t in texts}
    forms |= {raw.hex().encode(), raw.hex().upper().encode(), *_base64_forms(raw)}
    return {raw} | {f for f in forms if len(f) >= MIN_LENGTH}


def _json_forms(secret: str) -> Iterator[str]:
    """Inside a JSON string as `json.dumps` writes it (ASCII-only or not), once or twice escaped."""
    for ensure_ascii in (True, False):
        once = json.dumps(secret, ensure_ascii=ensure_ascii)[1:-1]
        yield once
        yield once.replace("/", "\\/")  # encoders that escape the solidus
        yield json.dumps(once, ensure_ascii=ensure_ascii)[1:-1]  # an error line quoting JSON text


def _url_forms(secret: str) -> Iterator[str]:
    """Percent-encoded as `quote`/`quote_plus` write it, every byte encoded, hex digits in either case."""
    raw = secret.encode("utf-8", "surrogatepass")
    every = "".join(f"%{b:02X}" for b in raw)
    for upper in (quote(raw, safe=""), quote(raw), quote_plus(raw, safe=""), quote_plus(raw), every):
        yield upper
        yield _lower_escapes(upper)


def _lower_escapes(text: str) -> str:
    """`%2F` → `%2f`, the rest unchanged."""
    parts = text.split("%")
    return parts[0] + "".join("%" + p[:2].lower() + p[2:] for p in parts[1:])


def _base64_forms(raw: bytes) -> Iterator[bytes]:
    """The secret alone in base64 and base64url (padded and not), and for each alignment k of
    the secret in a longer stream (it starts at byte 3n + k) the run of characters that depends
    on the secret's bytes alone: from character ⌈8k/6⌉ to ⌊8(k + len)/6⌋."""
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        whole = encode(raw)
        yield whole
        yield whole.rstrip(b"=")
        for k in range(3):
            stream = encode(bytes(k) + raw + bytes(3))
            yield stream[-(-8 * k // 6) : 8 * (k + len(raw)) // 6]


def _alternation(forms: set[bytes]) -> Any:
    """One RE2 pattern of literals. Longest first: at one place the first alternative that matches
    wins (leftmost-first; RE2's leftmost-longest mode outgrows its DFA with a few hundred forms and
    then runs 300× slower)."""
    ordered = sorted(forms, key=lambda f: (-len(f), f))
    return re2.compile(b"|".join(map(re2.escape, ordered)), _OPTIONS) if ordered else None


class Redactor:
    """Masks known secrets, in every form of `forms_of`, with `***` (longest match first)."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        forms = {f for s in secrets if s for f in forms_of(s)}
        self._memo: dict[str, str] = {}
        """Short texts masked before, and how (`__call__`); at most `MEMO_SIZE`."""
        self._pattern: Any = _alternation(forms)
        self._flat: Any = _alternation({g for f in forms if len(g := _flattened(f)[0]) >= MIN_LENGTH})
        """The forms with blank and invisible characters taken out, matched on text flattened the same way."""

    def __bool__(self) -> bool:
        return self._pattern is not None

    def __call__(self, text: str) -> str:
        if not text or self._pattern is None:
            return text
        if len(text) > MEMO_TEXT:
            return self.pieces([text])[0]
        # A short text is often asked again: a call's command on every call, an input's preview by
        # the replay record and then the timeline row. The secrets never change, so neither does
        # the answer.
        masked = self._memo.get(text)
        if masked is None:
            if len(self._memo) >= MEMO_SIZE:
                self._memo.clear()
            masked = self._memo[text] = self.pieces([text])[0]
        return masked

    def blob(self, data: bytes) -> bytes:
        """Binary data with each secret form overwritten by as many `*` (so offsets inside a file hold)."""
        spans = self._spans(data)
        if not spans:
            return data
        out = bytearray(data)
        for start, end in spans:
            out[start:end] = b"*" * (end - start)
        return bytes(out)

    def pieces(self, texts: list[str]) -> list[str]:
        """The strings with secrets masked as if they were one text: a secret split across two of
        them (two content blocks of one result) is masked in both, each part as `***`. The same
        list comes back when nothing was masked."""
        if self._pattern is None or not texts:
            return texts
        spans = self._spans("".join(texts).encode("utf-8", "surrogatepass"))
        if not spans:
            return texts
        raw = [t.encode("utf-8", "surrogatepass") for t in texts]  # each piece's place in the joined bytes
        out, offset = [], 0
        for piece in raw:
            out.append(_masked(piece, offset, spans).decode("utf-8", "surrogatepass"))
            offset += len(piece)
        return out

    def _spans(self, data: bytes) -> list[tuple[int, int]]:
        """Where the secrets' forms are in `data`, sorted and disjoint. A form with invisible or
        blank characters put between its characters (base64 or hex wrapped at a fixed width, a
        secret cut by a line break, spaced out, a zero-width space inside) counts too: the text is
        matched once more with those characters taken out."""
        if self._pattern is None:
            return []
        spans = [m.span() for m in self._pattern.finditer(data)]
        flat, wide = _flattened(data)
        if len(flat) < len(data) and self._flat is not None and self._flat.search(flat) is not None:
            found = [m.span() for m in self._flat.finditer(flat)]  # rare: only when a secret is there at all
            spans += [wide(start, end) for start, end in found if end > start]
        return _merged(spans)


_ASCII_IGNORED = bytes([*range(0x21), 0x7F])
"""C0 controls, space and DEL: taken out before matching the flat text (bytes.translate, in C)."""
_WIDE_IGNORED = [(a, b) for a, b in HIDDEN if b >= 0x80 and not (a >= 0xD800 and b <= 0xDFFF)]
_WIDE_IGNORED[0] = (0x80, _WIDE_IGNORED[0][1])  # the C1 controls (DEL, 0x7F, is ASCII)
_WIDE_SPACE = [(0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000)]
_WIDE_OPTIONS = re2.Options()
_WIDE_OPTIONS.never_capture = True
_WIDE_OPTIONS.log_errors = False
_WIDE = re2.compile(
    "[" + "".join(f"\\x{{{a:x}}}-\\x{{{b:x}}}" for a, b in [*_WIDE_IGNORED, *_WIDE_SPACE]) + "]+", _WIDE_OPTIONS
)
"""Runs of the other characters taken out: `safe_text.HIDDEN` above ASCII and Unicode spaces (UTF-8)."""


def _flattened(data: bytes) -> tuple[bytes, Callable[[int, int], tuple[int, int]]]:
    """`data` without blank and invisible characters, and the function that turns a span of it
    back into the span of `data` it came from (invisible characters inside included)."""
    wide = [m.span() for m in _WIDE.finditer(data)] if max(data, default=0) >= 0x80 else []
    narrow = b"".join(data[a:b] for a, b in _kept(wide, len(data))) if wide else data
    flat = narrow.translate(None, _ASCII_IGNORED)

    def back(start: int, end: int) -> tuple[int, int]:
        first, last = _placed(narrow, start), _placed(narrow, end - 1)
        return _widened(wide, first), _widened(wide, last) + 1

    return flat, back


def _kept(removed: list[tuple[int, int]], size: int) -> Iterator[tuple[int, int]]:
    at = 0
    for start, end in removed:
        yield at, start
        at = end
    yield at, size


def _widened(removed: list[tuple[int, int]], offset: int) -> int:
    """The offset in the text before `removed` (sorted spans) were taken out, of a kept byte."""
    for start, end in removed:
        if start > offset:
            break
        offset += end - start
    return offset


def _placed(data: bytes, target: int) -> int:
    """Where the kept byte at offset `target` of `data.translate(None, _ASCII_IGNORED)` is in `data`
    (bytes.count in C, so a text of many short lines costs a few passes, not a loop per line)."""
    here, flat = 0, 0
    while True:
        step = target - flat
        gone = sum(data.count(b, here, here + step) for b in _ASCII_SINGLE) if step else 0
        here, flat = here + step, flat + step - gone
        if not gone:
            while data[here : here + 1] and data[here] in _ASCII_IGNORED:
                here += 1
            return here


_ASCII_SINGLE = [bytes([b]) for b in _ASCII_IGNORED]


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _masked(piece: bytes, offset: int, spans: list[tuple[int, int]]) -> bytes:
    """`piece` (at `offset` of the joined text) with each part of it a span covers replaced by the mask."""
    end, kept, at = offset + len(piece), [], offset
    for start, stop in spans:
        if stop <= at or start >= end:
            continue
        kept += [piece[at - offset : max(start, at) - offset], MASK.encode()]
        at = min(stop, end)
    return b"".join([*kept, piece[at - offset :]]) if kept else piece


def redact_json(value: Any, redact: Redactor) -> Any:
    """A copy of a JSON-like value with every string (keys too) redacted, all strings read as one
    text so a secret split across two of them is masked as well."""
    if not redact:
        return value
    strings: list[str] = []
    _collect(value, strings)
    masked = redact.pieces(strings)
    if masked is strings:
        return value
    return _rebuild(value, iter(masked))


def _collect(value: Any, into: list[str]) -> None:
    if isinstance(value, str):
        into.append(value)
    elif isinstance(value, list):
        for v in value:
            _collect(v, into)
    elif isinstance(value, dict):
        for k, v in value.items():
            into.append(str(k))
            _collect(v, into)


def _rebuild(value: Any, masked: Iterator[str]) -> Any:
    if isinstance(value, str):
        return next(masked)
    if isinstance(value, list):
        return [_rebuild(v, masked) for v in value]
    if isinstance(value, dict):
        return {next(masked): _rebuild(v, masked) for k, v in value.items()}
    return value


_process_secrets: set[str] = set()
_process_redactor = Redactor()


def guard_logs(secrets: Iterable[str]) -> None:
    """Redact these secrets from every log record of this process, whichever logger writes it."""
    global _process_redactor
    new = set(secrets) - _process_secrets
    if not new:
        return
    _process_secrets.update(new)
    _process_redactor = Redactor(_process_secrets)
    if not getattr(logging.getLogRecordFactory(), "_toolshell_redacts", False):
        logging.setLogRecordFactory(_redacting_factory(logging.getLogRecordFactory()))


def _redacting_factory(inner: logging._LogRecordFactory) -> logging._LogRecordFactory:  # type: ignore[name-defined]
    def factory(*args: object, **kwargs: object) -> logging.LogRecord:
        record: logging.LogRecord = inner(*args, **kwargs)
        if _process_redactor:
            message = record.getMessage()
            redacted = _process_redactor(message)
            if redacted != message:
                record.msg, record.args = redacted, ()
            if record.exc_info and record.exc_info[1] is not None:
                record.exc_text = _process_redactor(logging.Formatter().formatException(record.exc_info))
                record.exc_info = None
        return record

    factory._toolshell_redacts = True  # type: ignore[attr-defined]
    return factory
