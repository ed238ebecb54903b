"""What a live shell holds in memory between calls: the bytes of the files in its sandbox.

The walk reads each directory's entries (their sizes come with them) and leaves out what is not
held in memory: mounted host directories and bashkit's own `/dev` and `/proc`. It is bounded
(`MAX_ENTRIES`): a shell with more entries than that counts as holding `MAX_ENTRIES` times
`ENTRY_BYTES` at least, so a tree of many tiny files is not free either.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

MAX_ENTRIES = 200_000
"""The most directory entries one walk reads."""
ENTRY_BYTES = 256
"""What one entry (a file's or directory's bookkeeping) is counted as beside its bytes."""
_NOT_HELD = ("/dev", "/proc", "/sys")


def files_bytes(bash: Any, mounted: Iterable[str] = ()) -> int:
    """The bytes of the files of `bash` (a `bashkit.Bash`), mounts under `mounted` left out, plus
    `ENTRY_BYTES` per entry."""
    skip = {*_NOT_HELD, *(m.rstrip("/") or "/" for m in mounted)}
    total, seen, todo = 0, 0, ["/"]
    while todo and seen < MAX_ENTRIES:
        directory = todo.pop()
        try:
            entries = bash.read_dir(directory)
        except Exception:  # bashkit.BashError: gone, or not readable; it holds nothing we can count
            continue
        for entry in entries:
            seen += 1
            path = directory.rstrip("/") + "/" + entry["name"]
            meta = entry["metadata"]
            total += ENTRY_BYTES
            if meta["file_type"] == "directory":
                if path not in skip:
                    todo.append(path)
            elif meta["file_type"] == "file":
                total += int(meta["size"])
    return max(total, seen * ENTRY_BYTES)
