"""The rules that decide what a failure is: the infrastructure's (wait it out), our code's
(pause), or the message's (dead-letter it, with a reason code)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from aiokafka.errors import (
    KafkaError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    ProducerClosed,
    RecordListTooLargeError,
)
from redis.exceptions import (
    ClusterDownError,
    OutOfMemoryError,
    ReadOnlyError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from streams.kafka.errors import PublisherStopped
from streams.kafka.pauses import is_programming_error, tenant_of
from workers.errors import TemporarilyUnavailable, Unprocessable, read_pruned

# Reason codes of the dead letters written here (streams.kafka.serde has the decoding ones).
UNPROCESSABLE = "unprocessable"
PROCESSING = "processing"
OUTPUT_TOO_LARGE = "output_too_large"
INTERNAL = "internal"

_REDIS_TRANSIENT = (
    RedisConnectionError  # BusyLoadingError and AuthenticationError are subclasses
    | RedisTimeoutError
    | OutOfMemoryError  # maxmemory with noeviction: frees up when consumers catch up
    | ReadOnlyError  # a replica during failover
    | TryAgainError
    | ClusterDownError
)


def is_transient(exc: BaseException) -> bool:
    """The retry rule: True when the infrastructure failed, not the message.

    - Kafka: by aiokafka's own `retriable` flag (leader moves, unreachable nodes...), plus
      KafkaTimeoutError (a full accumulator: the broker is slow, whatever its flag says)
      and our own shutdown (ProducerClosed, PublisherStopped). MessageSizeTooLargeError and
      the other non-retriable errors are permanent: retrying cannot change the outcome.
    - TemporarilyUnavailable (an LLM or embeddings endpoint down, rate-limited, or refusing
      our configuration): the work waits for it, without limit.
    - Redis: connection errors, timeouts, out of memory, read-only replicas.
    - OSError (includes the builtin ConnectionError and TimeoutError, disk full, LanceDB I/O):
      a message's bytes cannot cause one; pausing beats dead-lettering good data. So
      is a LanceDB read of a version another process's forget pruned (`read_pruned`).
    """
    if isinstance(exc, KafkaTimeoutError | ProducerClosed | PublisherStopped):
        return True
    if isinstance(exc, KafkaError):
        return bool(exc.retriable)
    if isinstance(exc, TemporarilyUnavailable | _REDIS_TRANSIENT):
        return True
    return isinstance(exc, OSError) or read_pruned(exc)


def reason_code(exc: BaseException) -> str:
    """The dead-letter reason code of a permanent failure."""
    if isinstance(exc, Unprocessable):
        return UNPROCESSABLE
    if isinstance(exc, MessageSizeTooLargeError | RecordListTooLargeError):
        return OUTPUT_TOO_LARGE
    return PROCESSING


def waits(exc: BaseException) -> bool:
    """The rule of the ingest stages for messages that name no namespace: wait out what is
    not the message's fault."""
    return is_transient(exc) or is_programming_error(exc)


def waits_for(values: Iterable[object]) -> Callable[[BaseException], bool]:
    """The rule for handling `values`: a programming error is waited on at once only when
    none of them names a namespace. Otherwise it may be one tenant's input that trips our
    code, and the streak rule (`pauses.Streak.verdict`) decides, message by message, whether
    it pauses the stage or dead-letters that tenant's messages."""
    if all(tenant_of(v) is None for v in values):
        return waits
    return is_transient
