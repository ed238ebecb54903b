"""Which call a question to a person is about: the ordinal of the nested call being made (`calls.replay`).

A task parked while a person thinks is resumed by replay with the answers it got, and a question
the replay asks again takes its stored answer only when it is the same question at the same place:
the same message, asked for the same call. The place is the call's ordinal in the run, set while
that call is made live (`Pipeline`), or `BEFORE_START` for the before-start check; None where it
cannot be told (a server's question that reaches us outside the call's context), and such a
question is never answered from a stored answer.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

BEFORE_START = 0
"""The place of a question the before-start check asks (before any call has an ordinal)."""

_ASKING: ContextVar[int | None] = ContextVar("toolshell_asking_for_call", default=None)


@contextmanager
def asking_for(ordinal: int) -> Iterator[None]:
    """Questions asked in the block (in this task, and those it starts) are about call `ordinal`."""
    token = _ASKING.set(ordinal)
    try:
        yield
    finally:
        _ASKING.reset(token)


def asked_for() -> int | None:
    """The ordinal of the call the question being asked now is about; None when it cannot be told."""
    return _ASKING.get()


__all__ = ["BEFORE_START", "asked_for", "asking_for"]
