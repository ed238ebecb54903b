"""What a live shell holds in memory between calls: the bytes of the files in its sandbox.

The walk (`files_bytes`) reads each directory's entries (their sizes come with them) and leaves
out what is not held in memory: mounted host directories and bashkit's own `/dev` and `/proc`. It
is bounded (`MAX_ENTRIES`): a shell with more entries than that counts as holding `MAX_ENTRIES`
times `ENTRY_BYTES` at least, so a tree of many tiny files is not free either.

A walk reads every entry (bashkit's ~340 command stubs in `/bin` and `/usr/bin` alone cost ~1 ms),
so a serving worker walks a shell once and then keeps the count up to date from its commits
(`LiveBytes`): after each call the shell is committed anyway, and bashkit's diff of two commits
(`SnapshotGraph.diff`, which needs only the commits' structure objects, never a file's content)
names every path added, changed or removed; only those are looked at again (~0.1–0.2 ms on a
small shell, against ~0.9 ms for the walk).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

from bashkit import SnapshotGraph

MAX_ENTRIES = 200_000
"""The most directory entries one walk reads."""
ENTRY_BYTES = 256
"""What one entry (a file's or directory's bookkeeping) is counted as beside its bytes."""
_NOT_HELD = ("/dev", "/proc", "/sys")
SEEN_OBJECTS = 64
"""The structure objects of recent commits a `LiveBytes` keeps (about 16 commits' worth)."""
_STRUCTURE_WAVES = 2
"""A commit's structure: the commit object, then what it names (file tree, shell state,
capabilities); the third wave of `plan_checkout` is the files' contents."""


def files_bytes(bash: Any, mounted: Iterable[str] = ()) -> int:
    """The bytes of the files of `bash` (a `bashkit.Bash`), mounts under `mounted` left out, plus
    `ENTRY_BYTES` per entry."""
    total, seen = _walk(bash, _skipped(mounted), {})
    return max(total, seen * ENTRY_BYTES)


def _skipped(mounted: Iterable[str]) -> set[str]:
    return {*_NOT_HELD, *(m.rstrip("/") or "/" for m in mounted)}


def _walk(bash: Any, skip: set[str], sizes: dict[str, int]) -> tuple[int, int]:
    """The bytes and the entries of `bash`'s files, walked; each non-empty file's size goes in `sizes`."""
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
            elif meta["file_type"] == "file" and (size := int(meta["size"])):
                total += size
                sizes[path] = size
    return total, seen


class LiveBytes:
    """`files_bytes` of one live shell, kept up to date from its commits.

    Args:
        mounted: the shell's mount points (their files are the host's, not held in memory).
    """

    def __init__(self, mounted: Iterable[str] = ()) -> None:
        self._skip = _skipped(mounted)
        self._under = tuple(s.rstrip("/") + "/" for s in self._skip)
        self._sizes: dict[str, int] = {}
        """Each non-empty file's size, by path."""
        self._entries = 0
        self._tip: str | None = None
        """The commit the count is of; None: walk next time."""
        self._structure: dict[str, bytes] = {}
        self._seen: OrderedDict[str, bytes] = OrderedDict()
        """Structure objects of recent commits: a commit leaves out those the store holds, and a
        shell's state (its variables, its file tree) often comes back to one it had before."""

    @property
    def total(self) -> int:
        return sum(self._sizes.values()) + self._entries * ENTRY_BYTES

    def measure(self, bash: Any, tip: str | None = None, objects: Mapping[str, bytes] | None = None) -> int:
        """The bytes of `bash`'s files, now that its state is the commit `tip`, whose objects new
        since the last measure (or all of them) are among `objects`. Without a commit, or one that
        cannot be compared with the last, it walks the whole shell."""
        structure = None if tip is None else _structure(tip, {**self._seen, **(objects or {})})
        if structure is None or tip is None:
            return self._walked(bash, None, {})
        self._keep(structure)
        if tip == self._tip:
            return self.total
        if self._tip is not None:
            try:
                changed = SnapshotGraph.diff(self._tip, tip, {**self._structure, **structure})
            except Exception:  # bashkit.BashError: an object missing after all; count afresh
                return self._walked(bash, tip, structure)
            self._apply(bash, changed)
            self._tip, self._structure = tip, structure
            return self.total
        return self._walked(bash, tip, structure)

    def _keep(self, structure: dict[str, bytes]) -> None:
        for key, value in structure.items():
            self._seen[key] = value
            self._seen.move_to_end(key)
        while len(self._seen) > SEEN_OBJECTS:
            self._seen.popitem(last=False)

    def _walked(self, bash: Any, tip: str | None, structure: dict[str, bytes]) -> int:
        self._sizes = {}
        total, seen = _walk(bash, self._skip, self._sizes)
        self._entries = seen
        self._tip, self._structure = tip, structure
        if seen >= MAX_ENTRIES:  # past the bound: no per-path count to keep up to date
            self._tip, self._structure, self._sizes = None, {}, {}
        return max(total, seen * ENTRY_BYTES)

    def _apply(self, bash: Any, changed: Any) -> None:
        """Count what `changed` (a `bashkit.SnapshotDiff`) says was added, changed or removed."""
        for path in changed.files_removed:
            if self._held(path):
                self._entries -= 1
                self._sizes.pop(path, None)
        for path in changed.files_added:
            if self._held(path):
                self._entries += 1
                self._stat(bash, path)
        for path in changed.files_modified:
            if self._held(path):
                self._stat(bash, path)
        if self._entries >= MAX_ENTRIES:  # as a walk would: count at the bound, and walk next time
            self._tip = None

    def _held(self, path: str) -> bool:
        """Whether the walk counts `path`: anything not inside a mount or bashkit's own trees."""
        return not path.startswith(self._under)

    def _stat(self, bash: Any, path: str) -> None:
        try:
            meta = bash.stat(path)
        except Exception:  # bashkit.BashError: gone since the commit; the next commit says so
            self._sizes.pop(path, None)
            return
        size = int(meta["size"]) if meta["file_type"] == "file" else 0
        if size:
            self._sizes[path] = size
        else:
            self._sizes.pop(path, None)


def _structure(tip: str, objects: Mapping[str, bytes]) -> dict[str, bytes] | None:
    """The structure objects of the commit `tip` (`_STRUCTURE_WAVES`), or None when `objects` lacks one."""
    got: dict[str, bytes] = {}
    for _ in range(_STRUCTURE_WAVES):
        for wanted in SnapshotGraph.plan_checkout(tip, got):
            found = objects.get(wanted)
            if found is None:
                return None
            got[wanted] = found
    return got
