"""The errors every stage shares: what a port's implementation raises to tell the stage
runner what to do with a message, and the conversation files' error.

`Unprocessable` and `TemporarilyUnavailable` are the contract between an adapter (LLM,
embeddings, store) and the stream that runs the stage: the first dead-letters the message,
the second pauses consumption and retries, so that no work is dropped while a dependency is
down. A folder's own errors (`workers.store.errors`, `workers.query.errors` ...) subclass
them where they mean the same.
"""

from __future__ import annotations

from schemas.errors import LycheeError


class Unprocessable(LycheeError):
    """This message can never be processed as it is: dead-letter it now, with this reason."""


class UnprocessableReply(Unprocessable):
    """A model's reply to this message can never be used (not valid after a repair, or the
    request refused as malformed): the message's fault while it happens to one message, the
    model's when the next messages of other namespaces meet it too. Then the stage pauses
    instead of draining every tenant's work into dead letters (the stream's streak rule)."""


class TemporarilyUnavailable(LycheeError):
    """A dependency is down for now: retry later (pausing consumption), never drop the work.
    `tokens_per_s`: how fast an LLM was writing when it last wrote, so that a pause says
    whether the model is down or only slow."""

    def __init__(
        self, message: str, retry_after_s: float | None = None, tokens_per_s: float | None = None
    ) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
        self.tokens_per_s = tokens_per_s


PRUNED_READ_ATTEMPTS = 3  # reads of a version a forget pruned: forgets are rare


def read_pruned(exc: BaseException) -> bool:
    """Whether a read failed because a forget's rewrite pruned the table version it was
    reading (lance: "Not found: .../records.lance/data/....lance"): another process's
    forget does that to a reader mid-read, or to one whose view lags (`read_consistency_s`);
    the same read at the table's latest version succeeds."""
    text = str(exc)
    return (
        isinstance(exc, RuntimeError)
        and text.startswith("lance error")
        and "Not found: " in text
        and ".lance/" in text
    )


class Refused(TemporarilyUnavailable):
    """A dependency refuses every request until someone fixes the configuration (a 401, 403 or
    404: key, permissions, model name). Nothing is wrong with the message, so the stage pauses
    like for an outage and keeps saying why (`hint` names what to check); it never drops work."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message, None)
        self.hint = hint


class DatasetError(LycheeError, ValueError):
    """A conversation file that does not have the expected layout; says where."""
