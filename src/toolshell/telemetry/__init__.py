"""OpenTelemetry traces of shell calls and the `tools` calls in them (`docs/telemetry.md`).

Off by default and free when off: `telemetry_for` reads the config and the `OTEL_*` variables
and only then imports the OpenTelemetry SDK (`toolshell[otel]`); when tracing is off it returns
None and the call path's hooks are each one `is None` test.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from toolshell.config.models import TelemetryConfig

if TYPE_CHECKING:
    from toolshell.redact import Redactor
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


__all__ = ["telemetry_for", "wanted"]
