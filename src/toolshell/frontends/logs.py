"""The command line's one logging setup: every library's records (`mcp.*`, `httpx`, toolshell's own)
reach stderr as one escaped line each, `toolshell: <logger>: <message>`, with no traceback.

Without it, Python's last-resort handler prints a record logged with `logger.exception` (the
SDK's `Error parsing JSON response` when a server sends `{not json`) with its full traceback: a
hostile server could fill a terminal. `--debug` or `TOOLSHELL_DEBUG=1` logs everything from DEBUG
up, tracebacks included, for someone tracking a problem down.
"""

from __future__ import annotations

import logging
import sys

from toolshell.safe_text import escape

_MAX_DETAIL = 300
"""Characters of an exception's text kept on a record's line."""

_QUIET_WHEN_DEBUGGING = ("httpcore", "hpack", "multipart")
"""Byte-level chatter that drowns everything else at DEBUG."""


class _OneLine(logging.Formatter):
    """`toolshell: name: message (Error: detail)` on one line: controls escaped, no traceback."""

    def format(self, record: logging.LogRecord) -> str:
        line = f"toolshell: {record.name}: {record.getMessage()}"
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            detail = " ".join(str(exc).split())
            if len(detail) > _MAX_DETAIL:
                detail = detail[:_MAX_DETAIL] + "…"
            line += f" ({type(exc).__name__}: {detail}; --debug shows the traceback)"
        return escape(line)


class _Stderr(logging.Handler):
    """Writes to whatever `sys.stderr` is at the time (a test runner swaps it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
            sys.stderr.flush()
        except Exception:  # logging must never raise; the stdlib's own fallback reports it
            self.handleError(record)


_handler = _Stderr()
_debug = False


def setup_logging(debug: bool = False) -> None:
    """Route every logger through one stderr handler; `debug`: DEBUG level, tracebacks kept.

    Called once per process by the `toolshell` command (before any subcommand, `serve` included);
    calling it again replaces the setup rather than adding a second handler. Like
    `logging.basicConfig`, it leaves a logging setup someone else made (an embedding program, a
    test runner) as it is.
    """
    global _debug
    _debug = debug
    root = logging.getLogger()
    if any(handler is not _handler for handler in root.handlers):
        return
    _handler.setFormatter(logging.Formatter("toolshell: %(levelname)s %(name)s: %(message)s") if debug else _OneLine())
    if _handler not in root.handlers:
        root.addHandler(_handler)
    root.setLevel(logging.DEBUG if debug else logging.WARNING)
    for name in _QUIET_WHEN_DEBUGGING:
        logging.getLogger(name).setLevel(logging.INFO if debug else logging.NOTSET)


def debugging() -> bool:
    """Whether `--debug` / `TOOLSHELL_DEBUG` is on (then tracebacks are shown, not summarised)."""
    return _debug
