"""What a live shell lends to its own catch-up: the objects of a newer commit it already holds.

A worker whose live shell is one or more versions behind the stored one reads only the objects
stored since its version (`Shells._catch_up`). The new commit also names objects that did not
change (the files the other worker's call left alone, the shell's capabilities), which the live
shell holds as its current state. A full commit of it would hand all of them over; asking bashkit
for a commit with everything but the wanted ids marked as held hands over only those.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping

from bashkit import SnapshotGraph

from toolshell.errors import ErrorCode, ToolshellError

Commit = Callable[[Collection[str]], tuple[str, dict[str, bytes]]]
"""`Session.commit`: the shell's commit id and its objects not among those given."""
MAX_WAVES = 4
"""A checkout's waves: the commit, what it names (file tree, shell state, capabilities), the files."""


def objects_for(tip: str, newer: Mapping[str, bytes], commit: Commit, have: Collection[str]) -> dict[str, bytes]:
    """Every object a checkout of `tip` needs: `newer`, and those it lacks taken from the live shell.

    Args:
        tip: the stored commit to check out.
        newer: the objects stored since the version the live shell holds.
        commit: the live shell's `Session.commit`.
        have: the ids of every object of the live shell's state (all of them are in the store).

    Raises:
        ToolshellError: `unavailable` when the live shell does not hold a wanted object (then read
            them all from the store).
    """
    got = dict(newer)
    for _ in range(MAX_WAVES):
        wanted = set(SnapshotGraph.plan_checkout(tip, got))
        if not wanted:
            return got
        _, lent = commit([i for i in have if i not in wanted])
        if not wanted <= lent.keys():
            raise ToolshellError(ErrorCode.UNAVAILABLE, "the live shell does not hold what the stored commit names")
        got.update((i, lent[i]) for i in wanted)
    raise ToolshellError(ErrorCode.UNAVAILABLE, "the stored commit names more waves of objects than a shell has")
