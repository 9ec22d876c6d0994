"""Dead letters over HTTP, for the console's operations page and any other client: by topic
and reason with a sample of each, and their replay (over `streams.dlq`, the code `lychee dlq`
runs).

A dead letter holds any namespace's text, and a replay writes to the stack's topics: both
routes are for a caller allowed every namespace (no keys, or a key for `*`). A replay is a
write that a browser might be tricked into sending: as every write, JSON only, and without
keys only from the gateway's own pages (`streams.gateway.admission`). As with the CLI, a second replay of the same dead
letters is refused (409) unless forced.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

from aiokafka.errors import KafkaError
from fastapi import APIRouter, Query
from pydantic import AwareDatetime
from redis.exceptions import RedisError

from schemas.gateway import DeadLettersOut, Problem, ReplayIn, ReplayOut
from streams import dlq
from streams.errors import DeadLetterError
from streams.gateway.deps import KnownQuery, Service, StackWide
from streams.gateway.errors import Conflict, Invalid
from streams.gateway.service import MemoryService

router = APIRouter(
    prefix="/v1/dead-letters",
    dependencies=[KnownQuery],
    responses={code: {"model": Problem} for code in (401, 403, 422, 503)},
)


@contextmanager
def _answered(svc: MemoryService) -> Iterator[None]:
    """The dead-letter commands' errors as the gateway's."""
    try:
        yield
    except DeadLetterError as exc:
        raise Invalid(str(exc), field="topic") from exc
    except (KafkaError, RedisError, TimeoutError) as exc:
        raise svc.down(exc) from exc


@router.get("", response_model=DeadLettersOut)
async def dead_letters(
    _: StackWide,
    svc: Service,
    topic: Annotated[
        str | None, Query(max_length=200, description="a source topic or its .dlq; default all")
    ] = None,
    error_type: Annotated[str | None, Query(max_length=200, description="one reason")] = None,
    since: Annotated[AwareDatetime | None, Query(description="failed at or after")] = None,
) -> DeadLettersOut:
    """Dead letters by topic and reason: count, oldest and newest failure, how many were
    replayed before or failed again after a replay, and one sample (as `lychee dlq list`);
    none of a namespace or session forgotten since."""
    with _answered(svc):
        letters = await dlq.read(svc.settings, [topic] if topic else None, error_type, since)
        letters = dlq.unforgotten(letters, await dlq.forgotten(svc.redis, letters))
        receipts = await dlq.receipts_of(svc.redis, letters)
    return DeadLettersOut.model_validate({"reasons": dlq.summarize(letters, receipts)})


@router.post(
    "/replay",
    response_model=ReplayOut,
    responses={409: {"model": Problem}, 415: {"model": Problem}},
)
async def replay(_: StackWide, body: ReplayIn, svc: Service) -> ReplayOut:
    """Produce the selected dead letters back to their source topics, once each (as `lychee
    dlq replay`); `dry_run` says what would be sent. 409 when every selected dead letter was
    replayed before, unless `force`."""
    with _answered(svc):
        report = await dlq.replay(
            svc.settings,
            body.topic,
            body.error_type,
            body.since,
            dry_run=body.dry_run,
            force=body.force,
        )
    refusal = report.refusal()
    if refusal and not body.dry_run:
        raise Conflict(f"{refusal}; force replays them again", field="force")
    return ReplayOut(**vars(report), refusal=refusal)
