"""A real OTLP/HTTP receiver on 127.0.0.1 for the telemetry tests: it decodes the exported
protobuf (`ExportTraceServiceRequest` on `/v1/traces`, `ExportMetricsServiceRequest` on
`/v1/metrics`) and keeps every span, with its resource attributes, and every metric point."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


@dataclass
class Received:
    """One exported span, decoded, with its status message and its events (an exception the SDK
    recorded would be an `exception` event)."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    status: int
    attributes: dict[str, Any]
    service: str
    status_message: str = ""
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


@dataclass
class Point:
    """One exported metric data point, decoded: a sum's or gauge's `value`, a histogram's `count`
    and `sum` (seconds for durations)."""

    metric: str
    unit: str
    kind: str
    """`sum`, `gauge` or `histogram`."""
    attributes: dict[str, Any]
    value: float = 0.0
    count: int = 0
    sum: float = 0.0
    resource: dict[str, Any] = field(default_factory=dict)


@dataclass
class Receiver:
    url: str
    spans: list[Received] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    points: list[Point] = field(default_factory=list)
    logs: list[dict[str, Any]] = field(default_factory=list)
    """Each exported log record: its `event_name`, `body` and attributes, and its resource's service."""

    def metric(self, name: str) -> list[Point]:
        return [p for p in self.points if p.metric == name]

    def named(self, name: str) -> list[Received]:
        return [s for s in self.spans if s.name == name]

    def one(self, name: str) -> Received:
        found = self.named(name)
        assert len(found) == 1, (name, [s.name for s in self.spans])
        return found[0]


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    return None if kind is None else getattr(value, kind)


def _points(metric: Any, resource: dict[str, Any]) -> list[Point]:
    kind = metric.WhichOneof("data")
    found = []
    for point in getattr(metric, kind).data_points:
        attributes = {a.key: _value(a.value) for a in point.attributes}
        shown = Point(metric.name, metric.unit, kind, attributes, resource=resource)
        if kind == "histogram":
            shown.count, shown.sum = point.count, point.sum
        else:
            shown.value = point.as_double if point.WhichOneof("value") == "as_double" else point.as_int
        found.append(shown)
    return found


@contextmanager
def otlp_receiver() -> Iterator[Receiver]:
    """Serve `POST /v1/traces` on a free loopback port until the block ends."""
    lock = threading.Lock()
    receiver = Receiver("")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            if self.path == "/v1/metrics":
                self._metrics(body)
                return
            if self.path == "/v1/logs":
                self._logs(body)
                return
            request = ExportTraceServiceRequest.FromString(body)
            with lock:
                receiver.paths.append(self.path)
                for resource_spans in request.resource_spans:
                    resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
                    for scope in resource_spans.scope_spans:
                        for span in scope.spans:
                            receiver.spans.append(
                                Received(
                                    name=span.name,
                                    trace_id=span.trace_id.hex(),
                                    span_id=span.span_id.hex(),
                                    parent_span_id=span.parent_span_id.hex(),
                                    kind=span.kind,
                                    status=span.status.code,
                                    attributes={a.key: _value(a.value) for a in span.attributes},
                                    service=str(resource.get("service.name")),
                                    status_message=span.status.message,
                                    events=[
                                        (e.name, {a.key: _value(a.value) for a in e.attributes}) for e in span.events
                                    ],
                                )
                            )
            self._answer(ExportTraceServiceResponse().SerializeToString())

        def _logs(self, body: bytes) -> None:
            request = ExportLogsServiceRequest.FromString(body)
            with lock:
                receiver.paths.append(self.path)
                for resource_logs in request.resource_logs:
                    resource = {a.key: _value(a.value) for a in resource_logs.resource.attributes}
                    for scope in resource_logs.scope_logs:
                        for record in scope.log_records:
                            attributes = {a.key: _value(a.value) for a in record.attributes}
                            receiver.logs.append(
                                {
                                    "event_name": record.event_name,
                                    "body": _value(record.body),
                                    "attributes": attributes,
                                    "service": resource.get("service.name"),
                                }
                            )
            self._answer(ExportLogsServiceResponse().SerializeToString())

        def _metrics(self, body: bytes) -> None:
            request = ExportMetricsServiceRequest.FromString(body)
            with lock:
                receiver.paths.append(self.path)
                for resource_metrics in request.resource_metrics:
                    resource = {a.key: _value(a.value) for a in resource_metrics.resource.attributes}
                    for scope in resource_metrics.scope_metrics:
                        for metric in scope.metrics:
                            receiver.points.extend(_points(metric, resource))
            self._answer(ExportMetricsServiceResponse().SerializeToString())

        def _answer(self, out: bytes) -> None:
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, format: str, *args: Any) -> None:  # quiet test output
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
