"""An OTLP/HTTP trace receiver on loopback: what an OpenTelemetry collector would be given.

`POST /v1/traces` bodies are decoded as `ExportTraceServiceRequest` with the OpenTelemetry
protobufs (gzip-compressed or not) and kept as flat `Span`s, so tests can ask which spans
each process exported and how they link:

    with OtlpReceiver() as rx:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": rx.url}
        ...
        spans = rx.spans()
"""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

KINDS = {0: "UNSPECIFIED", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}


@dataclass(frozen=True)
class Span:
    service: str
    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_id: str  # "" for a root span
    attributes: dict[str, Any] = field(default_factory=dict)
    links: tuple[tuple[str, str], ...] = ()  # (trace_id, span_id)
    status: int = 0  # 0 unset, 1 ok, 2 error


def _value(v: AnyValue) -> Any:
    which = v.WhichOneof("value")
    if which == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, which) if which else None


def decode_spans(body: bytes) -> list[Span]:
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    out = []
    for rs in request.resource_spans:
        resource = {a.key: _value(a.value) for a in rs.resource.attributes}
        for ss in rs.scope_spans:
            for s in ss.spans:
                out.append(
                    Span(
                        service=str(resource.get("service.name", "")),
                        name=s.name,
                        kind=KINDS.get(s.kind, str(s.kind)),
                        trace_id=s.trace_id.hex(),
                        span_id=s.span_id.hex(),
                        parent_id=s.parent_span_id.hex(),
                        attributes={a.key: _value(a.value) for a in s.attributes},
                        links=tuple((x.trace_id.hex(), x.span_id.hex()) for x in s.links),
                        status=s.status.code,
                    )
                )
    return out


class OtlpReceiver:
    """A threaded HTTP server keeping every span posted to it; `refused` counts bodies it
    could not decode (answered 400)."""

    def __init__(self) -> None:
        self._spans: list[Span] = []
        self._lock = threading.Lock()
        self.refused = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                try:
                    spans = decode_spans(body) if self.path == "/v1/traces" else None
                except Exception:  # noqa: BLE001 - a bad body is answered, not raised
                    spans = None
                if spans is None:
                    with receiver._lock:
                        receiver.refused += 1
                    self.send_response(400)
                    self.end_headers()
                    return
                with receiver._lock:
                    receiver._spans.extend(spans)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> OtlpReceiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def spans(self) -> list[Span]:
        with self._lock:
            return list(self._spans)
