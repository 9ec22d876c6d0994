"""The segmenter's errors, under the one root error."""

from __future__ import annotations

from schemas.errors import LycheeError


class StateConflict(LycheeError, RuntimeError):
    """Another writer kept changing a session's state; the batch is retried."""
