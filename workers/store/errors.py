"""The evidence store's errors, under one root."""

from __future__ import annotations

from schemas.errors import LycheeError
from workers.errors import TemporarilyUnavailable, Unprocessable


class StoreError(LycheeError, RuntimeError):
    """Base of the evidence store's errors."""


class EmbeddingMismatch(StoreError):
    """A table was built with another embedding model or dimension."""


class TurnReplaced(StoreError, Unprocessable):
    """A raw turn whose id is stored with other words: the turn the records cite is never
    replaced (only a forget removes it)."""


class TurnMissing(StoreError, LookupError):
    """A page was asked for by a turn the session does not hold: a mistyped or forgotten
    turn id must not read as the session's first page."""


class CommitConflict(StoreError, TemporarilyUnavailable):
    """A write kept losing LanceDB's optimistic commit to concurrent ones (a compaction, an
    index build, another process): transient, the stage retries the batch."""
