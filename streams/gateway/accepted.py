"""What the gateway makes of an exchange it accepts: its date, and what a re-sent exchange id
must carry again to be the same exchange."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from datetime import datetime

import orjson

from schemas.gateway import ExchangeIn


def dated(exchanges: Sequence[ExchangeIn], accepted_at: datetime) -> list[ExchangeIn]:
    """Each exchange with a date: its own (`session_date`, or a turn's `created_at`), else
    `accepted_at`, as MCP's `add_memory` dates what it is given. An undated record is never
    later than another session's, so nothing it says would replace an earlier value.

    A retry of the same request is stamped anew and is still the same exchange: neither the
    allocator's `content_digest` nor a turn's `Turn.digest` (what the segmenter's turn-id
    check compares) reads dates, an id acked before is answered as a duplicate without being
    produced, and one produced again under its seq is a replay the segmenter ignores, so the
    first stamp the stages applied stays."""
    return [
        ex
        if ex.session_date is not None or any(t.created_at for t in ex.turns)
        else ex.model_copy(update={"session_date": accepted_at})
        for ex in exchanges
    ]


def content_digest(ex: ExchangeIn) -> str:
    """What a re-sent exchange id must carry again: its turns (`Turn.said`) and their ids.
    Dates and metadata may differ, so that a retry stamped anew is still the same exchange."""
    words = [(*t.said(), t.turn_id) for t in ex.turns]
    return hashlib.sha256(orjson.dumps(words)).hexdigest()[:16]


def default_exchange_id(ex: ExchangeIn) -> str:
    """The id of an exchange sent without one. With the caller's own `seq`, its seq and
    content: a re-send after a 503 is the same exchange (a receipt, not a 409 for a seq
    already given). Without, a new one each time: the gateway numbers it, and a re-send is
    a new exchange."""
    if ex.seq is None:
        return uuid.uuid4().hex
    return f"seq{ex.seq}-{content_digest(ex)}"
