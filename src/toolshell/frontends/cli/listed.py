"""Which approval requests this terminal has listed, so `approvals grant ID` can tell a request
the person saw from an id they were handed (a stop report, a message, another agent's text).

A terminal is its device and its login session (`/dev/pts/3` with the session id of its shell),
so a later login on the same device is another terminal. The record is a small private file in
the state dir; a missing, unreadable or malformed one counts as "listed nothing", which only
means one more question.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from pathlib import Path

RECORD = "approvals-listed.json"
KEEP_TERMINALS = 32
KEEP_IDS = 500


def terminal() -> str | None:
    """This terminal (stdin's device and login session), or None when stdin is not a terminal."""
    try:
        if not sys.stdin.isatty():
            return None
        return f"{os.ttyname(sys.stdin.fileno())}:{os.getsid(0)}"
    except (OSError, ValueError):
        return None


def _read(path: Path) -> dict[str, list[str]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): [str(i) for i in v] for k, v in data.items() if isinstance(v, list)}


def was_listed(state_dir: Path, request_id: str) -> bool:
    """Whether this terminal listed `request_id` (False off a terminal)."""
    here = terminal()
    return here is not None and request_id in _read(state_dir / RECORD).get(here, [])


def remember(state_dir: Path, request_ids: list[str]) -> None:
    """Record that this terminal was shown these requests (nothing off a terminal, or on a write error)."""
    here = terminal()
    if here is None or not request_ids or not state_dir.is_dir():
        return
    path = state_dir / RECORD
    record = _read(path)
    ids = [i for i in record.pop(here, []) if i not in request_ids] + request_ids
    record[here] = ids[-KEEP_IDS:]
    record = dict(list(record.items())[-KEEP_TERMINALS:])  # the terminals that listed most recently
    with contextlib.suppress(OSError):
        fd, temp = tempfile.mkstemp(dir=state_dir, prefix=".listed-", suffix=".tmp")  # 0600
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(record, out)
        os.replace(temp, path)


__all__ = ["remember", "terminal", "was_listed"]
