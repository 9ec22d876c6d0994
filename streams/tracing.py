"""Turning OpenTelemetry tracing on, from the standard environment only.

Each process calls `setup` where it starts (a stage worker, the gateway, `lychee ingest` and
`ask`). With an OTLP endpoint in the environment (`OTEL_EXPORTER_OTLP_ENDPOINT` or
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) and the SDK not disabled (`OTEL_SDK_DISABLED`,
`OTEL_TRACES_EXPORTER=none`), it installs the SDK's tracer provider with a batching OTLP/HTTP
exporter; everything else (sampler, headers, timeouts, batch delays, resource attributes) is
the SDK's own reading of its `OTEL_*` variables. Without that environment nothing is
installed: the API stays a no-op, no exporter thread starts, and `workers.telemetry` returns
at once. The SDK is the `tracing` extra; asked for without it, tracing stays off with one
log line saying so.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import structlog

log = structlog.get_logger("lychee.tracing")

ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
_STATE: dict[str, Any] = {"provider": None, "done": False}


def wanted(env: Mapping[str, str] | None = None) -> bool:
    """Whether the environment asks for traces: an OTLP endpoint, the SDK not disabled."""
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if env.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() == "none":
        return False
    return any(env.get(name, "").strip() for name in ENDPOINTS)


def setup(process: str, env: Mapping[str, str] | None = None) -> bool:
    """Install the SDK for this process when the environment asks for it (once per process:
    the first caller names it). Returns whether spans are exported."""
    if _STATE["done"]:
        return _STATE["provider"] is not None
    _STATE["done"] = True
    if not wanted(env):
        return False
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        log.warning(
            "tracing.extra_missing",
            reason=f"OTEL_* asks for traces but the SDK is not installed ({exc.name})",
            fix="pip install 'lychee-memory[tracing]'",
            effect="no spans are exported",
        )
        return False
    attrs: dict[str, str] = {"lychee.process": process}
    if not (os.environ if env is None else env).get("OTEL_SERVICE_NAME"):
        attrs[SERVICE_NAME] = f"lychee-{process}"
    # Resource.create reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; the sampler comes
    # from OTEL_TRACES_SAMPLER, the exporter's endpoint, headers and timeout from its own
    provider = TracerProvider(resource=Resource.create(attrs))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    _STATE["provider"] = provider
    log.info("tracing.on", process=process, service=provider.resource.attributes[SERVICE_NAME])
    return True


def shutdown() -> None:
    """Export what is buffered and stop the exporter (also done at interpreter exit)."""
    provider = _STATE["provider"]
    if provider is not None:
        provider.shutdown()


def instrument_gateway(app: Any) -> None:
    """Server spans for the gateway's requests (the official ASGI instrumentation), when
    tracing is on; the per-message `receive`/`send` spans are left out."""
    if _STATE["provider"] is None:
        return
    try:
        from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
    except ImportError as exc:
        log.warning("tracing.gateway_uninstrumented", reason=f"{exc.name} is not installed")
        return
    FastAPIInstrumentor.instrument_app(
        app, exclude_spans=["receive", "send"], excluded_urls="/metrics,/healthz,/readyz"
    )
