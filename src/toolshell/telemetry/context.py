"""Where a span opened deep in the call path finds its parent, with no OpenTelemetry import.

The call path only ever touches this module: when tracing is off every hook is one `is None`
test, and nothing here loads the OpenTelemetry SDK. `toolshell.telemetry.spans` sets the parent
(the open nested call, else the shell call) in the task that runs it; a bashkit builtin runs in
a copy of its caller's context, so concurrent `tools … &` calls never see each other's span.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from typing import Any, Protocol


class SpanParent(Protocol):
    """Something a child span can be opened under (a shell call's or a nested call's span)."""

    def child(self, name: str, attributes: Mapping[str, Any]) -> AbstractContextManager[None]: ...


PARENT: ContextVar[SpanParent | None] = ContextVar("toolshell_span_parent", default=None)
UPSTREAM: ContextVar[Mapping[str, Any] | None] = ContextVar("toolshell_upstream_trace", default=None)
"""The `_meta` of the request that started this shell call (its `traceparent`/`tracestate`)."""

OUTGOING: ContextVar[Mapping[str, str] | None] = ContextVar("toolshell_outgoing_trace", default=None)
"""The `traceparent`/`tracestate` of the nested call being sent: what its request's `_meta` carries."""

_NOTHING: AbstractContextManager[None] = nullcontext()


def child_span(
    name: str, attributes: Mapping[str, Any], root: SpanParent | None = None
) -> AbstractContextManager[None]:
    """A span under the current parent (or under `root`, a host's tracer, when there is none);
    nothing at all when tracing is off."""
    parent = PARENT.get() or root
    return _NOTHING if parent is None else parent.child(name, attributes)


@contextmanager
def upstream(meta: Mapping[str, Any] | None) -> Iterator[None]:
    """Run a block with the upstream client's trace context (`params._meta`) as the shell call's parent."""
    if not meta or "traceparent" not in meta:
        yield
        return
    token = UPSTREAM.set({k: meta[k] for k in ("traceparent", "tracestate") if isinstance(meta.get(k), str)})
    try:
        yield
    finally:
        UPSTREAM.reset(token)
