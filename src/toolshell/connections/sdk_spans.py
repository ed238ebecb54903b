"""The SDK's per-request OpenTelemetry span, made free while nothing records spans.

Every lowlevel `Server` ships `OpenTelemetryMiddleware`: each request opens a span, extracts the
caller's trace context and builds its attributes. With no OpenTelemetry SDK installed as the
global tracer provider (toolshell's own `[telemetry]` uses a provider of its own), the span is a
no-op, yet it costs ~30 µs a request: as much as the tool of an in-process call. `lean_spans`
wraps the middleware of the servers toolshell serves in-process (its built-in servers, and
`serve`'s own) so that it steps aside while the global provider records nothing, and works as
before as soon as one does (an application that installs an SDK provider, even later).
"""

from __future__ import annotations

import os
from typing import Any

from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from opentelemetry import trace
from opentelemetry.environment_variables import OTEL_PYTHON_TRACER_PROVIDER

_FROM_ENV = os.environ.get(OTEL_PYTHON_TRACER_PROVIDER) is not None
"""A provider named by the environment is loaded by `get_tracer_provider` on first use."""


def recording() -> bool:
    """Whether the global tracer provider records spans (an OpenTelemetry SDK is installed)."""
    # Asked per request: while no provider was ever set (nor named by the environment), the
    # module's global is None, which reads in one load where `get_tracer_provider` looks up the
    # environment each time.
    if getattr(trace, "_TRACER_PROVIDER", ...) is None and not _FROM_ENV:
        return False
    provider = trace.get_tracer_provider()
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


class SpansWhenRecorded(ServerMiddleware[Any]):
    """The SDK's `OpenTelemetryMiddleware`, skipped while `recording()` is false."""

    def __init__(self, inner: ServerMiddleware[Any]) -> None:
        self.inner = inner

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if recording():
            return await self.inner(ctx, call_next)
        return await call_next(ctx)


def lean_spans(server: Any) -> Any:
    """`server` (a lowlevel `Server` or an `MCPServer`), its OpenTelemetry middleware made free
    while nothing records (`SpansWhenRecorded`); anything else is returned as it is."""
    lowlevel = server._lowlevel_server if isinstance(server, MCPServer) else server  # noqa: SLF001  (the SDK's own path)
    chain = getattr(lowlevel, "middleware", None)
    if isinstance(chain, list):
        chain[:] = [SpansWhenRecorded(m) if isinstance(m, OpenTelemetryMiddleware) else m for m in chain]
    return server
