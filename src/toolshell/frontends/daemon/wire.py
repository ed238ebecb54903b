"""What the thin client and the daemon say to each other: one JSON object per line.

The client sends one request and reads lines until the last: an empty chunk once the daemon
begins (before it, nothing ran: a connection reset then means a daemon that was stopping, and the
command runs cold), output chunks of a run as the script writes them, then the outcome; or
`fallback` (nothing ran: run the command cold). Standard library only.

    request   {"v": 1, "version": "…", "op": "run"|"plan"|"servers"|"status"|"stop",
               "address": {...}, ...the op's fields}
    accepted  {"out": "", "err": ""}                         (first: from here on it runs)
    chunk     {"out": "…", "err": "…"}
    outcome   {"exit": 0, "stdout": "…", "stderr": "…"}   (printed as they are, then the exit code)
    fallback  {"fallback": "why"}
    refusal   {"refused": "why"}                           (another user: nothing else is said)
"""

from __future__ import annotations

import json
import socket
import struct

TYPE_CHECKING = False  # `typing` is not imported here: every millisecond of start-up counts
if TYPE_CHECKING:
    from typing import Any

PROTOCOL = 1
MAX_LINE = 256 * 1024 * 1024
"""The longest line either side reads: a script, its stdin, or one output chunk."""


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass") + b"\n"


def decode(line: bytes) -> dict[str, Any]:
    """One message; ValueError when the line is not a JSON object."""
    message = json.loads(line.decode("utf-8", "surrogatepass"))
    if not isinstance(message, dict):
        raise ValueError("not a JSON object")
    return message


def peer_uid(sock: socket.socket) -> int:
    """The user id of the process at the other end of a Unix socket (Linux `SO_PEERCRED`)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)
