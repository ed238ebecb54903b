"""What a live shell lends to its own catch-up: the objects of a newer commit it already holds.

A worker whose live shell is one or more versions behind the stored one reads only the objects
stored since its version (`Shells._catch_up`). The new commit also names objects that did not
change (the files the other worker's call left alone, the shell's capabilities): the live shell
holds them as its current state. They come from `Recent`, the objects this worker last saw of the
shell (what it saved, read or checked out), while those stay small; else from a commit of the
live shell with everything but the wanted ids marked as held, which hands over only those.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping

from bashkit import SnapshotGraph

from toolshell.errors import ErrorCode, ToolshellError

Commit = Callable[[Collection[str]], tuple[str, dict[str, bytes]]]
"""`Session.commit`: the shell's commit id and its objects not among those given."""
MAX_WAVES = 4
"""A checkout's waves: the commit, what it names (file tree, shell state, capabilities), the files."""
RECENT_BYTES = 64 * 1024
"""The most bytes of objects `Recent` keeps for one live shell (a larger shell lends by commit)."""


class Recent:
    """Objects this worker saw of one shell lately: a content-addressed id always names the same
    bytes, so any of them may stand in for the live shell's own. Bounded by `RECENT_BYTES`."""

    def __init__(self) -> None:
        self._objects: dict[str, bytes] = {}
        self._bytes = 0

    def reset(self, objects: Mapping[str, bytes]) -> None:
        """Keep only `objects` (a whole state just checked out or committed), if they fit."""
        self._objects, self._bytes = {}, 0
        self.add(objects)

    def add(self, objects: Mapping[str, bytes]) -> None:
        """Keep `objects` too (what a call's commit added); past the bound, start again from them."""
        size = sum(len(d) for d in objects.values())
        if self._bytes + size > RECENT_BYTES:
            self._objects, self._bytes = {}, 0
            if size > RECENT_BYTES:
                return
        self._objects.update(objects)
        self._bytes += size

    def objects_for(
        self, tip: str, newer: Mapping[str, bytes], commit: Commit, have: Collection[str]
    ) -> dict[str, bytes]:
        """Every object a checkout of `tip` needs: `newer`, and those it lacks from what was seen
        lately or, failing that, lent by the live shell.

        Args:
            tip: the stored commit to check out.
            newer: the objects stored since the version the live shell holds.
            commit: the live shell's `Session.commit`.
            have: the ids of every object of the live shell's state (all of them are in the store).

        Raises:
            ToolshellError: `unavailable` when the live shell does not hold a wanted object (then
                read them all from the store).
        """
        got = dict(newer)
        for _ in range(MAX_WAVES + 1):  # the last finds nothing wanted
            wanted = set(SnapshotGraph.plan_checkout(tip, got))
            if not wanted:
                return got
            seen = wanted & self._objects.keys()
            got.update((i, self._objects[i]) for i in seen)
            wanted -= seen
            if wanted:
                _, lent = commit([i for i in have if i not in wanted])
                if not wanted <= lent.keys():
                    raise ToolshellError(
                        ErrorCode.UNAVAILABLE, "the live shell does not hold what the stored commit names"
                    )
                got.update((i, lent[i]) for i in wanted)
        raise ToolshellError(ErrorCode.UNAVAILABLE, "the stored commit names more waves of objects than a shell has")
