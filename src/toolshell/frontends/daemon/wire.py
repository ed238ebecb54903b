"""What the thin client and the daemon say to each other: one JSON object per line.

The client sends what it asks of which daemon; for a command, the daemon answers with the names
of the variables its answers depend on, and the client sends those of its environment (no other:
the rest of it may hold secrets no daemon needs) with the script. It then reads lines until the
last: an empty chunk once the daemon begins (before it, nothing ran: a connection reset or an end
then means a daemon that was stopping, and the command runs cold), output chunks of a run as the
script writes them, then the outcome; or `fallback` (nothing ran: run the command cold). Standard
library only.

    request   {"v": 2, "version": "…", "op": "run"|"plan"|"servers"|"status"|"stop",
               "address": {...}}
    compare   {"compare": {"names": [...], "prefixes": [...]}}   (run, plan, servers)
    detail    {"env": {...only those...}, "json": false, ...the op's fields: "script", "role"}
    accepted  {"out": "", "err": ""}                         (first: from here on it runs)
    chunk     {"out": "…", "err": "…"}
    outcome   {"exit": 0, "stdout": "…", "stderr": "…"}   (printed as they are, then the exit code)
    fallback  {"fallback": "why"}
    refusal   {"refused": "why"}                           (another user: nothing else is said)
"""

from __future__ import annotations

import _socket  # not `socket`: it imports `selectors` and `enum`, most of the thin client's start-up
import json
import struct

TYPE_CHECKING = False  # `typing` is not imported here: every millisecond of start-up counts
if TYPE_CHECKING:
    from typing import Any

PROTOCOL = 2
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


def peer_uid(sock: Any) -> int:
    """The user id of the process at the other end of a Unix socket (Linux `SO_PEERCRED`)."""
    creds = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


class Connection:
    """The client's end: one Unix stream socket, read a line at a time."""

    def __init__(self, timeout: float) -> None:
        self._sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        self._buffer = b""

    def connect(self, path: str) -> int:
        """Connect; the peer's uid. Raises OSError when nothing listens there."""
        self._sock.connect(path)
        return peer_uid(self._sock)

    def send(self, message: dict[str, Any]) -> None:
        self._sock.sendall(encode(message))

    def settimeout(self, timeout: float | None) -> None:
        self._sock.settimeout(timeout)

    def readline(self) -> bytes:
        """The next line, with its newline; b"" at the end. Raises ValueError past `MAX_LINE`."""
        while b"\n" not in self._buffer:
            chunk = self._sock.recv(65536)
            if not chunk:
                line, self._buffer = self._buffer, b""
                return line
            self._buffer += chunk
            if len(self._buffer) > MAX_LINE:
                raise ValueError("a line longer than the protocol allows")
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line + b"\n"

    def close(self) -> None:
        self._sock.close()
