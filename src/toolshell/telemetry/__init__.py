"""OpenTelemetry traces and metrics of shell calls and the `tools` calls in them (`docs/telemetry.md`).

Off by default and free when off: `telemetry_for` and `metrics_for` read the config and the
`OTEL_*` variables and only then import the OpenTelemetry SDK (`toolshell[otel]`); when off they
return None and the call path's hooks are each one `is None` test.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from toolshell.config.models import TelemetryConfig

if TYPE_CHECKING:
    from toolshell.redact import Redactor
    from toolshell.store.protocol import StateStore
    from toolshell.telemetry.metrics import Metrics
    from toolshell.telemetry.spans import Telemetry

logger = logging.getLogger(__name__)

_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def wanted(config: TelemetryConfig, env: Mapping[str, str] = os.environ) -> bool:
    """Whether to trace: `[telemetry] enabled`, else an OTLP endpoint in the environment;
    `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` turn it off whatever the config says."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    if config.enabled is not None:
        return config.enabled
    return any(env.get(name) for name in _ENDPOINTS)


def telemetry_for(config: TelemetryConfig, redact: Redactor) -> Telemetry | None:
    """The host's tracer, or None when tracing is off or the `otel` extra is not installed."""
    if not wanted(config):
        return None
    try:
        # lazy: the OpenTelemetry SDK loads only when tracing is on (free when off)
        from toolshell.telemetry.spans import Telemetry
    except ImportError:
        logger.warning("tracing is configured but the OpenTelemetry SDK is missing: pip install 'toolshell[otel]'")
        return None
    return Telemetry.configured(config, redact)


def metrics_wanted(config: TelemetryConfig, env: Mapping[str, str] = os.environ) -> bool:
    """Whether to export metrics over OTLP: `[telemetry] enabled` (and `metrics`), else an OTLP
    endpoint for them in the environment; `OTEL_SDK_DISABLED=true` or `OTEL_METRICS_EXPORTER=none`
    turn it off (`OTEL_TRACES_EXPORTER=none` leaves metrics alone)."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true" or not config.metrics:
        return False
    if env.get("OTEL_METRICS_EXPORTER", "").strip().lower() == "none":
        return False
    if config.enabled is not None:
        return config.enabled
    return any(env.get(name) for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"))


def metrics_for(
    config: TelemetryConfig,
    store: StateStore,
    *,
    worker: str,
    idle_seconds: float,
    heartbeat_seconds: float,
    redact: Redactor | None = None,
    env: Mapping[str, str] = os.environ,
) -> Metrics | None:
    """The host's metrics: exported over OTLP/HTTP when traces are (unless `[telemetry] metrics =
    false` or `OTEL_METRICS_EXPORTER=none`), kept for Prometheus when `prometheus_port` is set;
    None when neither, or when the `otel` extra is not installed. `redact` masks the labels a
    server chose (a tool's name)."""
    otlp = config.metrics and wanted(config, env) and env.get("OTEL_METRICS_EXPORTER", "").strip().lower() != "none"
    if not otlp and config.prometheus_port is None:
        return None
    try:
        # lazy: the OpenTelemetry SDK loads only when metrics are on (free when off)
        from toolshell.telemetry.metrics import Metrics
    except ImportError:
        logger.warning("metrics are configured but the OpenTelemetry SDK is missing: pip install 'toolshell[otel]'")
        return None
    return Metrics.configured(
        config,
        store,
        worker=worker,
        otlp=otlp,
        idle_seconds=idle_seconds,
        heartbeat_seconds=heartbeat_seconds,
        redact=redact,
    )


__all__ = ["metrics_for", "metrics_wanted", "telemetry_for", "wanted"]
