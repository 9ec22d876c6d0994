"""The errors of the top-level plumbing: the client, seq allocation, ingest and dead letters.

Each keeps the built-in base that says what kind of failure it is (a reply timeout is a
`TimeoutError`, a rejected seq a `ValueError`), under the one root error.
"""

from __future__ import annotations

from schemas import QueryReply
from schemas.errors import LycheeError

# -- the client ----------------------------------------------------------------------------


class ClientError(LycheeError, RuntimeError):
    """Base of the client's errors."""


class StoreMissing(ClientError):
    """A direct read of LanceDB (records, turns, history) names a directory that does not
    exist."""


class RecordMissing(ClientError, LookupError):
    """One record's history was asked for, and the namespace holds no record of that id: a
    mistyped id must not read as "never replaced"."""

    def __init__(self, namespace: str, record_id: str) -> None:
        super().__init__(f"no record {record_id} in namespace {namespace}")
        self.namespace = namespace
        self.record_id = record_id


class BrokerUnreachable(ClientError, ConnectionError):
    """The client's first connection to Kafka found no broker."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(
            f"cannot reach Kafka at {bootstrap} (no broker answers); is `lychee up` running, "
            "and does LYCHEE_KAFKA_BOOTSTRAP point at it?"
        )
        self.bootstrap = bootstrap


class MessageTooLarge(ClientError, ValueError):
    """An exchange whose message is over the stages' limit: the broker would take it and the
    stages dead-letter it, so it is not sent."""

    def __init__(self, exchange_id: str, size: int, limit: int) -> None:
        super().__init__(
            f"exchange {exchange_id} makes a message of {size} bytes, more than the {limit} "
            "the stages accept (LYCHEE_MAX_MESSAGE_BYTES); split its turns over several exchanges"
        )
        self.exchange_id = exchange_id
        self.size = size
        self.limit = limit


class ReplyTimeout(ClientError, TimeoutError):
    def __init__(self, correlation_id: str, timeout_s: float) -> None:
        super().__init__(f"no reply to {correlation_id} within {timeout_s:g}s")
        self.correlation_id = correlation_id
        self.timeout_s = timeout_s


class QueryFailed(ClientError):
    def __init__(self, reply: QueryReply) -> None:
        super().__init__(reply.error or "query failed")
        self.reply = reply


class UnreadableReply(ClientError):
    """A reply that came back and fails its contract: the query service's fault, not the
    caller's (a gateway answers 502, naming what in it is wrong)."""


class ForgetFailed(ClientError):
    def __init__(self, forget_id: str, errors: dict[str, str]) -> None:
        super().__init__(
            f"forget {forget_id} failed: " + "; ".join(f"{s}: {e}" for s, e in errors.items())
        )
        self.errors = errors


# -- seq allocation ------------------------------------------------------------------------


class SeqError(LycheeError):
    """Base of the allocator's errors."""


class SeqRejected(SeqError, ValueError):
    """A wanted seq or exchange id that cannot be accepted; `index` is its position in the
    request's list, `seq` the seq it conflicts with, `turn` the position of a turn whose id
    names other words in the session."""

    def __init__(self, index: int, reason: str, seq: int, turn: int | None = None) -> None:
        self.index = index
        self.reason = reason
        self.seq = seq
        self.turn = turn
        super().__init__(self.describe())

    @property
    def field(self) -> str:
        """The refused field, within its exchange."""
        if self.reason == "turn":
            return f"turns.{self.turn}.turn_id"
        return "exchange_id" if self.reason in ("conflict", "changed") else "seq"

    def describe(self) -> str:
        if self.reason == "turn":
            return (
                f"turns.{self.turn}.turn_id (the caller's, else made of the exchange_id and "
                "the turn's position) names a turn of this session with other words; a new "
                "turn needs a new turn_id"
            )
        if self.reason == "conflict":
            return f"this exchange_id was accepted with seq {self.seq}"
        if self.reason == "changed":
            return (
                f"this exchange_id was accepted (seq {self.seq}) with other content; "
                "a new exchange needs a new exchange_id"
            )
        if self.reason == "full":
            return (
                f"the session's seqs are used up (its last is {self.seq}, the largest a seq "
                "can be); continue in a new session"
            )
        if self.reason == "stale":
            return f"seq must be above {self.seq}, the session's last accepted or applied seq"
        if self.reason == "given":
            return (
                f"seq must be above {self.seq}, the highest seq given in this session (to an "
                "exchange that may still be on its way): send a session's exchanges in order"
            )
        return f"seq must increase within a session; the one before it is {self.seq}"


class SessionBusy(SeqError, TimeoutError):
    """Another process produced to the session for longer than the caller could wait."""


# -- ingest and dead letters ---------------------------------------------------------------


class IngestError(LycheeError, ValueError):
    """A file's exchanges cannot be accepted as they are (for example a stale `seq`)."""


class DeadLetterError(LycheeError):
    """A dead-letter command cannot do what was asked (unknown topic, no such offset...)."""
