"""The network address a shell call came from, as `toolshell serve --http` saw it.

The serving layer knows the request (its peer, or the client a trusted proxy named:
`frontends.serve.forwarded`); the ledger that writes the shell call's row is deep in the call
path. Like the upstream trace context (`telemetry.context`), the address travels in a context
variable set around the run, so no layer between has to pass it on. Runs with no request behind
them (the CLI, triggers) record None.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_ADDRESS: ContextVar[str | None] = ContextVar("toolshell_caller_address", default=None)


@contextmanager
def calling_from(address: str | None) -> Iterator[None]:
    """Run a block whose shell calls record `address` as where their caller is."""
    token = _ADDRESS.set(address or None)
    try:
        yield
    finally:
        _ADDRESS.reset(token)


def caller_address() -> str | None:
    """The address of the request running this shell call, or None when there is none."""
    return _ADDRESS.get()
