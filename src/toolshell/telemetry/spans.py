"""The spans: one per shell call, a child per nested `tools` call, and one per approval wait and
server start (`docs/telemetry.md` lists every attribute).

Names and attributes follow the OpenTelemetry semantic conventions for MCP and GenAI tool calls
where they exist (`mcp.method.name`, `gen_ai.operation.name`, `gen_ai.tool.name`, `error.type`);
the rest are `toolshell.*`. A nested call's span is the current OpenTelemetry context while the
call is sent, so the SDK's client injects its `traceparent` into the request's `_meta` (SEP-414)
and a server that traces shows up in the same trace. Nothing a script or a server wrote is put on
a span unless `[telemetry] record_io` says so, and then redacted.

Every span is started through `Telemetry.start` and `_span`, which mask its name and every text
attribute with the config's secrets: a tool's name is the server's word, a command the script's,
and either may hold a secret (issue 30 §5). The attributes set later are codes, counts and texts
`Telemetry.io` already masked.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar, Token
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.propagate import extract, inject
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from toolshell.config.models import TelemetryConfig
from toolshell.errors import ToolshellError
from toolshell.redact import Redactor
from toolshell.registry.entry import ToolEntry
from toolshell.telemetry.context import OUTGOING, PARENT, UPSTREAM, SpanParent

IO_LIMIT = 1000
"""The most characters of an input or result put on a span (`record_io`)."""


class Telemetry:
    """The host's tracer. `Telemetry.configured` builds it; the host holds it (None when off)."""

    def __init__(
        self, tracer: trace.Tracer, config: TelemetryConfig, redact: Redactor, provider: TracerProvider | None
    ) -> None:
        self.tracer = tracer
        self.config = config
        self.redact = redact
        self._provider = provider  # ours to flush and shut down; None: the application's

    @classmethod
    def configured(cls, config: TelemetryConfig, redact: Redactor) -> Telemetry:
        """The application's tracer provider when it set one up, else ours exporting over OTLP/HTTP."""
        # lazy: the exporter pulls in protobuf and requests; only a host that exports loads them
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        ambient = trace.get_tracer_provider()
        if isinstance(ambient, TracerProvider):
            return cls(ambient.get_tracer("toolshell"), config, redact, None)
        endpoint = None if config.endpoint is None else config.endpoint.rstrip("/") + "/v1/traces"
        named = "service_name" in config.model_fields_set or not os.environ.get("OTEL_SERVICE_NAME")
        provider = TracerProvider(resource=Resource.create({"service.name": config.service_name} if named else {}))
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
        return cls(provider.get_tracer("toolshell"), config, redact, provider)

    def shell_trace(self, shell_call_id: str, session_id: str, caller: str | None) -> ShellTrace:
        return ShellTrace(self, shell_call_id, session_id, caller)

    def child(self, name: str, attributes: Mapping[str, Any]) -> AbstractContextManager[None]:
        """A span with no shell call above it (a server started when the host opens)."""
        return _span(self, name, attributes, None)

    def masked(self, attributes: Mapping[str, Any]) -> dict[str, Any]:
        """The attributes with every text masked, all read in one pass (`Redactor.pieces`)."""
        keys = [k for k, v in attributes.items() if isinstance(v, str)]
        texts = [attributes[k] for k in keys]
        shown = self.redact.pieces(texts)
        return dict(attributes) if shown is texts else {**attributes, **dict(zip(keys, shown, strict=True))}

    def start(self, name: str, attributes: Mapping[str, Any], parent: Span | None, **options: Any) -> Span:
        """A span started with its name and attributes masked (`parent` None: the current context's)."""
        context = options.pop("context", None) if parent is None else trace.set_span_in_context(parent)
        return self.tracer.start_span(self.redact(name), context=context, attributes=self.masked(attributes), **options)

    def io(self, value: Any) -> str:
        """An input or result as a span shows it: JSON, redacted, cut to `IO_LIMIT` characters.
        The whole text is masked first: cut first, a secret straddling the cut would keep the
        part before it (too short for the redactor to know)."""
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        return self.redact(text)[:IO_LIMIT]

    def flush(self) -> None:
        if self._provider is not None:
            self._provider.force_flush()

    def shutdown(self) -> None:
        if self._provider is not None:
            self._provider.shutdown()


@contextmanager
def _span(telemetry: Telemetry, name: str, attributes: Mapping[str, Any], parent: Span | None) -> Iterator[None]:
    """A current span around a block. The SDK never records an exception itself: its `exception`
    event and status description hold the whole message and traceback (a server's stderr, with
    whatever secret it printed); `failed` puts only the type, code and masked message on it."""
    context = None if parent is None else trace.set_span_in_context(parent)
    with telemetry.tracer.start_as_current_span(
        telemetry.redact(name),
        context=context,
        attributes=telemetry.masked(attributes),
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield
        except Exception as e:
            failed(telemetry, span, e)
            raise


def failed(telemetry: Telemetry, span: Span, error: Exception) -> None:
    """Mark a span failed by `error`: `error.type` and `toolshell.error_code` (the error's code, else
    its class), and its message masked and cut like any recorded text."""
    code = str(error.code) if isinstance(error, ToolshellError) else type(error).__qualname__
    message = telemetry.io(error.message if isinstance(error, ToolshellError) else str(error))
    span.set_attributes({"error.type": code, "toolshell.error_code": code, "toolshell.error.message": message})
    span.set_status(Status(StatusCode.ERROR, message))


class _OpenCall:
    """A nested call's span while the call is on its way; the parent of its approval waits."""

    def __init__(self, trace_: ShellTrace, span: Span) -> None:
        self.trace = trace_
        self.span = span
        self.undo: list[Callable[[], object]] = []

    def child(self, name: str, attributes: Mapping[str, Any]) -> AbstractContextManager[None]:
        return _span(self.trace.telemetry, name, attributes, self.span)


_CALL: ContextVar[_OpenCall | None] = ContextVar("toolshell_open_call", default=None)


class ShellTrace:
    """The spans of one shell call, fed by its `Ledger` at the points it already records."""

    def __init__(self, telemetry: Telemetry, shell_call_id: str, session_id: str, caller: str | None) -> None:
        self.telemetry = telemetry
        self.shell_call_id = shell_call_id
        self.session_id = session_id
        self.caller = caller
        self.span: Span | None = None
        self._parent: Token[SpanParent | None] | None = None

    def child(self, name: str, attributes: Mapping[str, Any]) -> AbstractContextManager[None]:
        return _span(self.telemetry, name, attributes, self.span)

    # --- the shell call ------------------------------------------------------------------------

    def shell_call(self, script: str, source: str, exit_code: int | None, calls: int) -> None:
        """Start the span (exit code None) or end it."""
        if exit_code is None:
            if self.span is None:
                self._start(script, source)
            return
        if self.span is None:
            return
        self.span.set_attributes({"toolshell.exit_code": exit_code, "toolshell.calls": calls})
        self.span.set_attribute("toolshell.outcome", "ok" if exit_code == 0 else "error")
        if exit_code != 0:
            self.span.set_status(Status(StatusCode.ERROR))
        self.span.end()
        if self._parent is not None:
            _reset(PARENT, self._parent)
            self._parent = None

    def _start(self, script: str, source: str) -> None:
        carrier = UPSTREAM.get()
        context = extract(carrier) if carrier else None  # the upstream client's call is our parent
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "bash",
            "toolshell.shell_call.id": self.shell_call_id,
            "toolshell.session.id": self.session_id,
            "toolshell.source": source,
        }
        if self.caller is not None:
            attributes["toolshell.caller"] = self.caller
        if self.telemetry.config.record_io:
            attributes["toolshell.script"] = self.telemetry.io(script)
        self.span = self.telemetry.start("execute_tool bash", attributes, None, context=context, kind=SpanKind.INTERNAL)
        self._parent = PARENT.set(self)  # a before-start approval wait nests under the shell call

    # --- nested calls --------------------------------------------------------------------------

    def call_started(self, entry: ToolEntry, arguments: dict[str, Any]) -> None:
        """A call passed the budget: its span opens and is current while the call is sent."""
        span = self._nested_span(entry, arguments, None)
        open_call = _OpenCall(self, span)
        current = trace.set_span_in_context(span)
        carrier: dict[str, str] = {}
        inject(carrier, context=current)  # `session_meta.request_meta` puts it in the request's `_meta`
        parent, outgoing, attached = PARENT.set(open_call), OUTGOING.set(carrier), otel_context.attach(current)
        open_call.undo = [lambda: otel_context.detach(attached), lambda: _reset(OUTGOING, outgoing)]
        open_call.undo.append(lambda: _reset(PARENT, parent))
        _CALL.set(open_call)

    def call_result(self, risk: str, result: Any) -> None:
        """The result came back: its risk and size (and, with `record_io`, the result itself)."""
        open_call = _CALL.get()
        if open_call is None:
            return
        open_call.span.set_attributes({"toolshell.risk": risk, "toolshell.result.bytes": _size(result)})
        if self.telemetry.config.record_io:
            open_call.span.set_attribute("gen_ai.tool.call.result", self.telemetry.io(_text(result)))

    def call_failed(self, risk: str) -> None:
        """The call was sent and failed (a timeout, a crash)."""
        open_call = _CALL.get()
        if open_call is not None:
            open_call.span.set_attribute("toolshell.risk", risk)

    def call_ended(
        self, entry: ToolEntry, arguments: dict[str, Any], outcome: str, code: str | None, duration_ms: float
    ) -> None:
        """The call's timeline row is written: its span ends (one is made now for a call that never
        reached the budget: unknown input, a refusal before start)."""
        open_call = _CALL.get()
        if open_call is None:
            started = time.time_ns() - int(duration_ms * 1_000_000)
            span = self._nested_span(entry, arguments, started)
        else:
            span = open_call.span
            _CALL.set(None)
            for undo in open_call.undo:
                undo()
        span.set_attributes({"toolshell.outcome": outcome, "toolshell.duration_ms": duration_ms})
        if code is not None:
            span.set_attributes({"error.type": code, "toolshell.error_code": code})
            span.set_status(Status(StatusCode.ERROR))
        span.end()

    def call_unresolved(
        self, command: str, arguments: dict[str, Any], outcome: str, code: str, duration_ms: float
    ) -> None:
        """A call that named no tool it could reach (`unknown_command`, a server not available): a
        span of its own, already ended, named `tools/call` alone (the name is whatever the script
        wrote), with the words that named it as `toolshell.command`, masked and cut like recorded text."""
        attributes: dict[str, Any] = {
            "mcp.method.name": "tools/call",
            "gen_ai.operation.name": "execute_tool",
            "toolshell.command": self.telemetry.io(command),
            "toolshell.shell_call.id": self.shell_call_id,
            "toolshell.outcome": outcome,
            "toolshell.duration_ms": duration_ms,
            "error.type": code,
            "toolshell.error_code": code,
        }
        if self.telemetry.config.record_io:
            attributes["gen_ai.tool.call.arguments"] = self.telemetry.io(arguments)
        started = time.time_ns() - int(duration_ms * 1_000_000)
        span = self.telemetry.start("tools/call", attributes, self.span, kind=SpanKind.CLIENT, start_time=started)
        span.set_status(Status(StatusCode.ERROR))
        span.end()

    def _nested_span(self, entry: ToolEntry, arguments: dict[str, Any], start_time: int | None) -> Span:
        attributes: dict[str, Any] = {
            "mcp.method.name": "tools/call",
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": entry.name,
            "toolshell.command": entry.command,
            "toolshell.shell_call.id": self.shell_call_id,
        }
        if entry.server is not None:
            attributes["toolshell.server"] = entry.server
        if self.telemetry.config.record_io:
            attributes["gen_ai.tool.call.arguments"] = self.telemetry.io(arguments)
        name = f"tools/call {entry.name}"
        return self.telemetry.start(name, attributes, self.span, kind=SpanKind.CLIENT, start_time=start_time)


def _reset(var: ContextVar[Any], token: Token[Any]) -> None:
    try:
        var.reset(token)
    except ValueError:  # set in another context (a run that ended in another task): nothing to undo here
        pass


def _text(result: Any) -> Any:
    """The result's text blocks; its structured content when it has no text."""
    texts = [str(b.text) for b in getattr(result, "content", []) if getattr(b, "type", "") == "text"]
    structured = getattr(result, "structured_content", None)
    return structured if not texts and structured is not None else "\n".join(texts)


def _size(result: Any) -> int:
    """The result's size in bytes: its text blocks, else its structured content as JSON."""
    value = _text(result)
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return len(text.encode("utf-8", "surrogatepass"))


__all__ = ["IO_LIMIT", "ShellTrace", "Telemetry"]
