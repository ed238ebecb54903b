"""OpenTelemetry metrics (`docs/telemetry.md`): exported over OTLP/HTTP with the traces, and
scraped by Prometheus on `[telemetry] prometheus_port`.

Names follow the OpenTelemetry semantic conventions where they name the metric:
`mcp.server.operation.duration` (a `bash` call served), `mcp.client.operation.duration` (a nested
call sent to a server) and `db.client.operation.duration` (a round trip to the state store), each a
histogram in seconds with the conventions' attributes (`mcp.method.name`, `gen_ai.tool.name`,
`gen_ai.operation.name`, `error.type`, `db.system.name`). The rest are `toolshell.*`. Labels are
of low cardinality by design: a server, a tool, an outcome, an error code, a source — never a
caller, a session, an input or a worker id (the worker is the resource's `service.instance.id`).
A call that named no tool it could reach is counted under one fixed `gen_ai.tool.name`,
`UNRESOLVED`: the words a script wrote never become a label (one series per word, and a secret
among them in clear). The labels a server chose (a tool's name) are masked with the config's
secrets before they are recorded, so neither the OTLP points nor the Prometheus scrape carry one.

The gauges (approvals pending, shells kept, workers alive) read the shared store when collected,
so every worker of a fleet reports the same fleet-wide number: aggregate them with `max`, not `sum`.
"""

from __future__ import annotations

import hmac
import logging
import os
import socketserver
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
from opentelemetry.sdk.resources import Resource

from toolshell.config.models import TelemetryConfig
from toolshell.errors import ErrorCode, ToolshellError
from toolshell.redact import Redactor
from toolshell.store.dialect import now_query
from toolshell.store.protocol import StateStore

logger = logging.getLogger(__name__)

DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60, 300)
"""Seconds: the semantic conventions' advice for `mcp.*.operation.duration`, plus a long tail for
scripts and approval waits that take minutes."""
_LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")
_EXECUTE = {"gen_ai.operation.name": "execute_tool"}
UNRESOLVED = "_unresolved"
"""The `gen_ai.tool.name` of every call that named no tool it could reach (`unknown_command`, a
server not available), the same whatever the script wrote; the leading `_` keeps it apart from the
names tools commonly have."""


class Metrics:
    """The instruments of one host, on a `MeterProvider` of its own. Build with `Metrics.configured`."""

    def __init__(
        self,
        provider: MeterProvider,
        store: StateStore,
        idle_seconds: float,
        heartbeat_seconds: float,
        registry: Any = None,
        redact: Redactor | None = None,
    ) -> None:
        self._provider = provider
        self._redact = redact or Redactor()
        self._registry = registry  # the Prometheus collector registry; None: no scrape
        self._store = store
        self._idle_seconds = idle_seconds
        self._heartbeat_seconds = heartbeat_seconds
        self._http: WSGIServer | None = None
        meter = provider.get_meter("toolshell")
        self.served = meter.create_histogram(
            "mcp.server.operation.duration", "s", "A `bash` call served, from its request to its result."
        )
        self.sent = meter.create_histogram(
            "mcp.client.operation.duration", "s", "A nested `tools` call sent to a server, until its result."
        )
        self.store_trip = meter.create_histogram(
            "db.client.operation.duration", "s", "A round trip to the state store."
        )
        self.shell_duration = meter.create_histogram(
            "toolshell.shell_call.duration", "s", "A shell call, from its start to its exit code."
        )
        self.approval_wait = meter.create_histogram(
            "toolshell.approval.wait.duration", "s", "How long a call waited for a person's answer."
        )
        self.shell_calls = meter.create_counter("toolshell.shell_calls", "{call}", "Shell calls that ended.")
        self.nested_calls = meter.create_counter(
            "toolshell.nested_calls", "{call}", "Nested `tools` calls, refused and stopped ones included."
        )
        self.heartbeats = meter.create_counter("toolshell.heartbeats", "{beat}", "Heartbeats this worker wrote.")
        meter.create_observable_gauge(
            "toolshell.approvals.pending", [self._pending], "{request}", "Approval requests waiting (fleet-wide)."
        )
        meter.create_observable_gauge(
            "toolshell.shells", [self._shells(False)], "{shell}", "Shells kept and not idle (fleet-wide)."
        )
        meter.create_observable_gauge(
            "toolshell.shells.bytes", [self._shells(True)], "By", "Bytes the kept shells take in the store."
        )
        meter.create_observable_gauge(
            "toolshell.workers.alive", [self._workers], "{worker}", "Workers beating on the store (fleet-wide)."
        )

    def watch_live_shells(self, held: Callable[[], dict[str, int]]) -> None:
        """Gauge this process's live shells and the bytes of their files (`Shells.held`): what
        `[serve] live_shell_bytes` bounds, per worker, where `toolshell.shells` counts the store's."""

        def count(options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(len(held()))]

        def size(options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(sum(held().values()))]

        meter = self._provider.get_meter("toolshell")
        meter.create_observable_gauge("toolshell.live_shells", [count], "{shell}", "Shells this worker holds live.")
        meter.create_observable_gauge(
            "toolshell.live_shells.bytes", [size], "By", "Bytes of files in the shells this worker holds live."
        )

    @classmethod
    def configured(
        cls,
        config: TelemetryConfig,
        store: StateStore,
        *,
        worker: str,
        otlp: bool,
        idle_seconds: float,
        heartbeat_seconds: float,
        redact: Redactor | None = None,
    ) -> Metrics:
        """Metrics exported over OTLP/HTTP (`otlp`) and/or kept for a Prometheus scrape
        (`[telemetry] prometheus_port`, served by `serve_prometheus`)."""
        readers: list[MetricReader] = []
        if otlp:
            # lazy: the exporter pulls in protobuf and requests; only a host that exports loads them
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

            endpoint = None if config.endpoint is None else config.endpoint.rstrip("/") + "/v1/metrics"
            readers.append(PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=endpoint)))
        registry = None
        if config.prometheus_port is not None:
            # lazy: Prometheus exposition only where a port is configured
            from opentelemetry.exporter.prometheus import PrometheusMetricReader
            from prometheus_client import CollectorRegistry

            registry = CollectorRegistry()  # this host's own: two hosts in a process never mix
            readers.append(PrometheusMetricReader(registry=registry))
        named = "service_name" in config.model_fields_set or not os.environ.get("OTEL_SERVICE_NAME")
        attributes = {"service.instance.id": worker, **({"service.name": config.service_name} if named else {})}
        histogram = ExplicitBucketHistogramAggregation(DURATION_BUCKETS)
        views = [View(instrument_name="*.duration", aggregation=histogram)]
        provider = MeterProvider(readers, resource=Resource.create(attributes), views=views)
        return cls(provider, store, idle_seconds, heartbeat_seconds, registry, redact)

    # --- what the call path records ------------------------------------------------------------

    def nested_call(self, server: str | None, tool: str, outcome: str, code: str | None, ms: float) -> None:
        """A nested call's timeline row was written (`calls.ledger`): its server (None for a top-level
        tool or one never resolved), the tool's name, its outcome and error code."""
        attributes: dict[str, Any] = {"gen_ai.tool.name": tool, "toolshell.outcome": outcome}
        if server is not None:
            attributes["toolshell.server"] = server
        if code is not None:
            attributes["error.type"] = code
        attributes = self._masked(attributes)
        self.nested_calls.add(1, attributes)
        if outcome in ("completed", "failed"):  # it was sent: an MCP operation
            sent = {**attributes, "mcp.method.name": "tools/call", **_EXECUTE}
            self.sent.record(ms / 1000, sent)

    def unresolved_call(self, outcome: str, code: str, ms: float) -> None:
        """A call that named no tool it could reach (`calls.ledger`): counted under `UNRESOLVED`."""
        self.nested_call(None, UNRESOLVED, outcome, code, ms)

    def shell_call(self, source: str, exit_code: int, seconds: float) -> None:
        attributes = {"toolshell.source": source, "toolshell.outcome": "ok" if exit_code == 0 else "error"}
        self.shell_calls.add(1, attributes)
        self.shell_duration.record(seconds, attributes)

    def bash_served(self, seconds: float, ok: bool) -> None:
        """A `bash` tools/call answered by `toolshell serve`."""
        attributes = {"mcp.method.name": "tools/call", "gen_ai.tool.name": "bash", **_EXECUTE}
        self.served.record(seconds, attributes if ok else {**attributes, "error.type": "tool_error"})

    def approval_waited(self, server: str | None, tool: str, answer: str | None, seconds: float) -> None:
        """A person was asked about a call (`calls.approval`); `answer` None: nobody answered."""
        attributes = {"gen_ai.tool.name": tool, "toolshell.answer": answer or "none"}
        labels = {**attributes, **({"toolshell.server": server} if server else {})}
        self.approval_wait.record(seconds, self._masked(labels))

    def _masked(self, attributes: dict[str, Any]) -> dict[str, Any]:
        """The labels with the config's secrets masked (a tool's name is what its server chose)."""
        keys = [k for k, v in attributes.items() if isinstance(v, str)]
        texts = [attributes[k] for k in keys]
        shown = self._redact.pieces(texts)
        return attributes if shown is texts else {**attributes, **dict(zip(keys, shown, strict=True))}

    @contextmanager
    def heartbeat(self) -> Iterator[None]:
        """Time one heartbeat: a write to the store, so also a sample of its round trip."""
        started = time.perf_counter()
        yield
        self.heartbeats.add(1)
        self.store_trip.record(time.perf_counter() - started, self._db("heartbeat"))

    def store_write(self, seconds: float, operation: str) -> None:
        self.store_trip.record(seconds, self._db(operation))

    def _db(self, operation: str) -> dict[str, str]:
        return {"db.system.name": "postgresql" if self._store.shared else "sqlite", "db.operation.name": operation}

    # --- the gauges, read from the store when collected ------------------------------------------

    def _pending(self, options: CallbackOptions) -> Iterable[Observation]:
        return self._count("SELECT COUNT(*) AS n FROM approval_requests WHERE status = 'pending'", ())

    def _shells(self, size: bool) -> Callable[[CallbackOptions], Iterable[Observation]]:
        column = "COALESCE(SUM(stored), 0)" if size else "COUNT(*)"

        def observe(options: CallbackOptions) -> Iterable[Observation]:
            cutoff = time.time() - self._idle_seconds
            return self._count(f"SELECT {column} AS n FROM shell_handles WHERE used_at >= ?", (cutoff,))

        return observe

    def _workers(self, options: CallbackOptions) -> Iterable[Observation]:
        now = f"(SELECT now FROM ({now_query(self._store.engine)}) AS clock)"  # beats are in the store's time
        sql = f"SELECT COUNT(*) AS n FROM workers WHERE heartbeat_at > {now} - ?"  # as `Workers.alive` judges
        return self._count(sql, (3 * self._heartbeat_seconds,))

    def _count(self, sql: str, params: tuple[Any, ...]) -> list[Observation]:
        try:
            rows = self._store.query(sql, params)
        except Exception:  # a table nothing made yet (no approval asked, no shell kept), or the store is away
            return []
        return [Observation(int(rows[0]["n"]))] if rows else []

    # --- Prometheus -------------------------------------------------------------------------------

    def serve_prometheus(self, host: str, port: int, token_env: str | None = None) -> str:
        """Serve `GET /metrics` (the Prometheus text format) on `host:port` in a thread; its URL.

        Only Host names that name this bind are answered (DNS-rebinding protection, as for every
        toolshell listener); a wildcard bind answers any. With `token_env` (the variable holding the
        token), a scrape must send `Authorization: Bearer <token>`; any other gets 401.

        Raises:
            ToolshellError: `unavailable` when the port cannot be bound; `invalid_input` when
                `token_env` names a variable that is not set.
        """
        token = scrape_token(token_env)
        # lazy: prometheus_client is needed only where a port is configured
        from prometheus_client import make_wsgi_app

        app = _host_checked(_token_checked(make_wsgi_app(self._registry), token), host)
        try:
            self._http = make_server(host, port, app, _ThreadingServer, handler_class=_Quiet)
        except OSError as e:
            raise ToolshellError(
                ErrorCode.UNAVAILABLE,
                f"[telemetry] prometheus_port {port} on {host} cannot be bound ({e.strerror or e}); choose another",
            ) from None
        threading.Thread(target=self._http.serve_forever, name="toolshell-metrics", daemon=True).start()
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{self._http.server_port}/metrics"

    def shutdown(self) -> None:
        """Export what is left and stop the Prometheus listener."""
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None
        try:
            self._provider.shutdown()
        except Exception:  # an exporter that cannot reach its collector: nothing more to do at exit
            logger.warning("the last metrics could not be exported", exc_info=True)


class _ThreadingServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # no access log on stderr
        pass


def _host_checked(app: Any, bind: str) -> Any:
    """The WSGI app, answering 403 to a Host that does not name this listener."""
    wildcard = bind in ("0.0.0.0", "::", "")

    def guarded(environ: dict[str, Any], start_response: Any) -> Any:
        host = str(environ.get("HTTP_HOST", ""))
        name = host[1:].partition("]")[0] if host.startswith("[") else host.rpartition(":")[0] or host
        if wildcard or name.lower() in (bind.lower(), *_LOOPBACK):
            return app(environ, start_response)
        start_response("403 Forbidden", [("Content-Type", "text/plain")])
        return [b"this Host is not served here\n"]

    return guarded


def scrape_token(variable: str | None, env: Mapping[str, str] | None = None) -> str | None:
    """The scrape token `[telemetry] prometheus_token_env` names, or None when none is configured.

    Raises:
        ToolshellError: `invalid_input` when the variable is named but empty or unset: serving
            the metrics open because a deployment lost its secret would be the wrong failure.
    """
    if variable is None:
        return None
    token = (os.environ if env is None else env).get(variable, "")
    if not token.strip():
        raise ToolshellError(
            ErrorCode.INVALID_INPUT,
            f"[telemetry] prometheus_token_env names {variable}, which is not set: set it to the scrape "
            "token, or remove prometheus_token_env to serve /metrics without one",
        )
    return token


def _token_checked(app: Any, token: str | None) -> Any:
    """The WSGI app, answering 401 to a scrape without `Authorization: Bearer <token>` (when set)."""
    if token is None:
        return app
    expected = f"Bearer {token}".encode()

    def guarded(environ: dict[str, Any], start_response: Any) -> Any:
        sent = str(environ.get("HTTP_AUTHORIZATION", "")).encode("utf-8", "replace")
        if hmac.compare_digest(sent, expected):
            return app(environ, start_response)
        challenge = 'Bearer realm="toolshell metrics"'
        start_response("401 Unauthorized", [("Content-Type", "text/plain"), ("WWW-Authenticate", challenge)])
        return [b"send Authorization: Bearer <the token of [telemetry] prometheus_token_env>\n"]

    return guarded


__all__ = ["DURATION_BUCKETS", "UNRESOLVED", "Metrics", "scrape_token"]
