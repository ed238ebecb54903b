"""Keeping secrets out of what scripts, logs and errors show.

The values of `${VAR}` expansions in a server's `command`, `args`, `env`, `url` and `headers` are
secrets when they are long enough to matter (6 characters or more) or when the variable's name says
so (TOKEN, SECRET, KEY, PASSWORD, AUTH). `Redactor` replaces each with `***` in any text; the host
applies it to every `tools` output, the shell call's result, diagnostics, timeline previews and
log records.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Any

MASK = "***"
MIN_LENGTH = 6
_SECRET_NAME = re.compile(r"TOKEN|SECRET|KEY|PASSWORD|PASSWD|AUTH|CREDENTIAL", re.IGNORECASE)


def is_secret(name: str, value: str) -> bool:
    """Whether the value of `${name}` must never be shown."""
    return bool(value) and (len(value) >= MIN_LENGTH or bool(_SECRET_NAME.search(name)))


class Redactor:
    """Replaces known secret values in text with `***`, longest first (so one never reveals part of another)."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        values = sorted({s for s in secrets if s}, key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(v) for v in values)) if values else None

    def __bool__(self) -> bool:
        return self._pattern is not None

    def __call__(self, text: str) -> str:
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(MASK, text)


def redact_json(value: Any, redact: Redactor) -> Any:
    """A copy of a JSON-like value with every string (keys too) redacted."""
    if not redact:
        return value
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [redact_json(v, redact) for v in value]
    if isinstance(value, dict):
        return {redact(str(k)): redact_json(v, redact) for k, v in value.items()}
    return value


def redact_result(result: Any, redact: Redactor) -> Any:
    """A copy of a `CallToolResult` with the secrets taken out of every block and its structured content."""
    if not redact:
        return result
    body = redact_json(result.model_dump(by_alias=True, mode="json", exclude_none=True), redact)
    return type(result).model_validate(body)


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
