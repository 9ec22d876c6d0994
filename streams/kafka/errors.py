"""The Kafka plumbing's errors, under the one root error."""

from __future__ import annotations

from schemas.errors import LycheeError


class SerdeError(LycheeError, ValueError):
    """A message that cannot be decoded or does not satisfy its contract."""

    def __init__(self, reason: str, error_type: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.error_type = error_type


class PublisherStopped(LycheeError, RuntimeError):
    """A send after `stop()`: the process is shutting down; the work is redone after restart."""


class CodecsMissing(LycheeError, RuntimeError):
    """The worker could not read batches compressed the way standard producers do."""
