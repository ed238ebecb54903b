"""The audit trail over the OpenTelemetry logs signal (`[audit] to = "otel"`): each line becomes one
log record, its fields the record's attributes and its `event.name` the event name, exported over
OTLP/HTTP to the collector `[telemetry] endpoint` (or the `OTEL_EXPORTER_OTLP_*` variables) names.

Records are batched by the SDK's processor, so unlike the file a crash can lose the last batch;
`shutdown` exports what is left. Imported only when configured: it needs the `otel` extra.
"""

from __future__ import annotations

import time
from typing import Any

from opentelemetry._logs import SeverityNumber
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import Resource

from toolshell.config.models import TelemetryConfig


class OtlpAuditLog:
    """Where audit records go when `[audit] to = "otel"`."""

    def __init__(self, config: TelemetryConfig) -> None:
        endpoint = None if config.endpoint is None else config.endpoint.rstrip("/") + "/v1/logs"
        self._provider = LoggerProvider(resource=Resource.create({"service.name": config.service_name}))
        self._provider.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter(endpoint=endpoint)))
        self._logger = self._provider.get_logger("toolshell.audit")

    def emit(self, record: dict[str, Any]) -> None:
        """One audit line as a log record (`None` fields left out, as in the file)."""
        attributes = {k: v for k, v in record.items() if v is not None and k != "time"}
        self._logger.emit(
            timestamp=time.time_ns(),
            severity_number=SeverityNumber.INFO,
            event_name=str(record.get("event.name", "toolshell.audit")),
            body=str(record.get("event.name", "")),
            attributes=attributes,
        )

    def shutdown(self) -> None:
        """Export what is left and stop."""
        self._provider.shutdown()


__all__ = ["OtlpAuditLog"]
