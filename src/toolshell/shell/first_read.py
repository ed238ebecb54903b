"""A read a caller of `Shells.run` makes before the call's script, made in the same worker-thread
hop as the shell's find (issue 31, round 3: each hop to a thread costs the event loop a wake-up).

The yielder (`frontends.serve.tasks.yielding`) would otherwise look for an earlier yielded call on
the shell in a hop of its own before every call; under `read_first` the look happens after the
shell's lock, with the find, and raising from it stops the call before its script runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

Check = Callable[[str], None]
"""Given the shell's handle; raises to stop the call before its script (nothing ran, nothing saved)."""

_FIRST: ContextVar[Check | None] = ContextVar("toolshell_first_read", default=None)


@contextmanager
def read_first(check: Check) -> Iterator[None]:
    """Shell calls made within run `check` in the hop that finds their shell."""
    token = _FIRST.set(check)
    try:
        yield
    finally:
        _FIRST.reset(token)


def first_read() -> Check | None:
    """The check of the `read_first` around this call, if any."""
    return _FIRST.get()
