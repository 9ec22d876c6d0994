"""Spans and W3C trace context, through the OpenTelemetry API only.

Stages call the API, as libraries do; a process turns tracing on by installing the SDK
(`streams.tracing.setup`). Until then every helper here returns at once: no span, no header,
nothing parsed, so an untraced process pays nothing. A context travels as the message
headers `traceparent` and `tracestate` (the pairs `OutMessage.headers` carries), and one
that cannot be read (a foreign producer's garbage) is ignored, never an error.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanKind, StatusCode
from opentelemetry.util.types import AttributeValue as AttributeValue

Headers = Iterable[tuple[str, bytes]]
TRACE_HEADERS = ("traceparent", "tracestate")
TRACER = "lychee"
MAX_LINKS = 64  # a segment of many exchanges links the first ones; the rest add nothing new


def active() -> bool:
    """Whether this process installed a tracer provider (the SDK): else spans are no-ops."""
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def tracer() -> trace.Tracer:
    return trace.get_tracer(TRACER)


def carrier(headers: Headers | None) -> dict[str, str]:
    """The trace headers as text; the first of a repeated name wins, unreadable bytes drop."""
    out: dict[str, str] = {}
    for name, value in headers or ():
        if name in TRACE_HEADERS and name not in out and isinstance(value, bytes | bytearray):
            try:
                out[name] = bytes(value).decode("ascii")
            except UnicodeDecodeError:
                continue
    return out


def parent(headers: Headers | None) -> Context | None:
    """The context a message's headers carry; None when absent, malformed or tracing is off."""
    if not active():
        return None
    found = carrier(headers)
    if "traceparent" not in found:
        return None
    try:
        ctx = propagate.extract(found)
    except Exception:  # noqa: BLE001 - a foreign header must never fail the message
        return None
    return ctx if trace.get_current_span(ctx).get_span_context().is_valid else None


def link_to(traceparent: str | None) -> Link | None:
    """A span link to the context a `traceparent` names; None when it names none."""
    if not traceparent:
        return None
    ctx = parent((("traceparent", traceparent.encode("ascii", "replace")),))
    return None if ctx is None else Link(trace.get_current_span(ctx).get_span_context())


def links(traceparents: Iterable[str | None]) -> list[Link]:
    """Links to distinct contexts, at most `MAX_LINKS`."""
    out: dict[tuple[int, int], Link] = {}
    for tp in traceparents:
        link = link_to(tp)
        if link is not None and len(out) < MAX_LINKS:
            out.setdefault((link.context.trace_id, link.context.span_id), link)
    return list(out.values())


def inject(headers: Sequence[tuple[str, bytes]] = ()) -> tuple[tuple[str, bytes], ...]:
    """`headers` with the current context's trace headers in place of any they had."""
    if not active():
        return tuple(headers)
    found: dict[str, str] = {}
    propagate.inject(found)
    if "traceparent" not in found:
        return tuple(headers)
    kept = [(k, v) for k, v in headers if k not in TRACE_HEADERS]
    return (*kept, *((k, v.encode("ascii")) for k, v in found.items() if k in TRACE_HEADERS))


def traceparent() -> str | None:
    """The current span's `traceparent`, to be linked to later; None when tracing is off."""
    if not active():
        return None
    found: dict[str, str] = {}
    propagate.inject(found)
    return found.get("traceparent")


def messaging(
    operation: str,
    topic: str,
    partition: int | None = None,
    offset: int | None = None,
    key: str | bytes | None = None,
) -> dict[str, AttributeValue]:
    """Kafka attributes of the messaging semantic conventions."""
    attrs: dict[str, AttributeValue] = {
        "messaging.system": "kafka",
        "messaging.operation.type": operation,
        "messaging.operation.name": operation,
        "messaging.destination.name": topic,
    }
    if partition is not None:
        attrs["messaging.destination.partition.id"] = str(partition)
    if offset is not None:
        attrs["messaging.kafka.offset"] = offset
    if key is not None:
        text = key.decode("utf-8", "replace") if isinstance(key, bytes) else key
        attrs["messaging.kafka.message.key"] = text[:256]
    return attrs


@contextlib.contextmanager
def span(
    name: str,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
    context: Context | None = None,
    links: Sequence[Link] = (),
    attributes: Mapping[str, AttributeValue] | None = None,
) -> Iterator[Span]:
    """A current span (a child of `context` when given); a no-op span when tracing is off."""
    if not active():
        yield trace.INVALID_SPAN
        return
    with tracer().start_as_current_span(
        name, context=context, kind=kind, links=links, attributes=attributes
    ) as current:
        yield current


@contextlib.contextmanager
def consumed(
    topic: str,
    headers: Headers | None,
    partition: int | None = None,
    offset: int | None = None,
    *,
    links: Sequence[Link] = (),
    attributes: Mapping[str, AttributeValue] | None = None,
) -> Iterator[Span]:
    """`process <topic>`: the handling of one consumed message, a child of the context its
    headers carry (or a new trace when they carry none)."""
    if not active():
        yield trace.INVALID_SPAN
        return
    attrs = {**messaging("process", topic, partition, offset), **(attributes or {})}
    with span(
        f"process {topic}",
        kind=SpanKind.CONSUMER,
        context=parent(headers),
        links=links,
        attributes=attrs,
    ) as current:
        yield current


def set_attributes(target: Span, attributes: Mapping[str, Any]) -> None:
    """Attributes that are set (None skipped), when the span records."""
    if target.is_recording():
        target.set_attributes({k: v for k, v in attributes.items() if v is not None})


@dataclass(frozen=True)
class Consumed:
    """One message of a batch, as much as its span needs."""

    headers: Headers | None
    partition: int | None = None
    offset: int | None = None


@contextlib.contextmanager
def batch(
    topic: str,
    name: str,
    messages: Sequence[Consumed],
    attributes: Mapping[str, AttributeValue] | None = None,
) -> Iterator[Span]:
    """One `process <topic>` span per message, each in its own message's trace, open until
    the batch's work is done, and the work itself as the current span `name`: a child of the
    first message's span, linked to the others'. So each message's trace ends where its
    batch was done (written, searchable), and the batch's span is found from any of them."""
    if not active() or not messages:
        yield trace.INVALID_SPAN
        return
    spans = [
        tracer().start_span(
            f"process {topic}",
            context=parent(m.headers),
            kind=SpanKind.CONSUMER,
            attributes=messaging("process", topic, m.partition, m.offset),
        )
        for m in messages
    ]
    first, rest = spans[0], spans[1:MAX_LINKS]
    try:
        with span(
            name,
            context=trace.set_span_in_context(first),
            links=[Link(s.get_span_context()) for s in rest],
            attributes={"messaging.batch.message_count": len(messages), **(attributes or {})},
        ) as current:
            yield current
    except BaseException as exc:
        for s in spans:
            s.set_status(StatusCode.ERROR, type(exc).__name__)
        raise
    finally:
        for s in spans:
            s.end()
