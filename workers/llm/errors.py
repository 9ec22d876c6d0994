"""The errors of an LLM call: a call that produced no completion (`CompletionError`, under
the root error), and the two ways a streamed attempt ends early, kept as the builtin
timeout and connection errors they are so that the retry rule reads them as such."""

from __future__ import annotations

from schemas.errors import LycheeError
from workers.llm.completion import Completion


class CompletionError(LycheeError):
    """No completion came back; `str()` is `reason`.

    `retryable_exhausted` is False when the server refused the request (a non-retryable
    error, e.g. a 4xx) and True when retryable failures outlasted the bounded attempts or the
    server asked for a wait longer than `max_delay_s`. `retry_after_s` is the server's hint
    on that last attempt (None for a refusal); `error` is the client's last exception;
    `tokens_per_s` the speed the last attempt was writing at, if it wrote anything.
    `overlong`: the server kept writing past the total limit; not retried, since the same
    request at temperature 0 writes the same (a small model looping), and `partial` holds
    what it wrote.
    """

    def __init__(
        self,
        reason: str,
        *,
        error: BaseException,
        retryable_exhausted: bool,
        retry_after_s: float | None = None,
        tokens_per_s: float | None = None,
        overlong: bool = False,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.error = error
        self.retryable_exhausted = retryable_exhausted
        self.retry_after_s = retry_after_s
        self.tokens_per_s = tokens_per_s
        self.overlong = overlong

    @property
    def partial(self) -> str:
        """What the last attempt wrote before it failed."""
        partial = getattr(self.error, "partial", None)
        return partial.text if isinstance(partial, Completion) else ""


class StreamTimeout(TimeoutError):
    """The stream stayed silent past a limit; `partial` is what had arrived by then."""

    def __init__(self, limit: str, limit_s: float, partial: Completion) -> None:
        super().__init__(f"{limit} limit of {limit_s:g} s passed ({_progress(partial)})")
        self.limit = limit
        self.limit_s = limit_s
        self.partial = partial


class StreamCut(ConnectionError):
    """The stream ended before the server said it was done (no finish_reason): the
    connection was cut in the middle; `partial` is what had arrived."""

    def __init__(self, partial: Completion) -> None:
        super().__init__(f"the stream ended before the reply was complete ({_progress(partial)})")
        self.partial = partial


def _progress(c: Completion) -> str:
    if c.first_token_s is None:
        return f"no token after {c.seconds:.1f} s"
    rate = c.tokens_per_s
    speed = f", {rate:.1f} tokens/s" if rate else ""
    return f"{c.chunks} chunks in {c.seconds:.1f} s, first after {c.first_token_s:.1f} s{speed}"


class ContextOverflow(LycheeError, ValueError):
    """A prompt that leaves too little of the model's context window for its reply; raised
    before the request is sent, which the server would refuse."""

    def __init__(self, prompt_tokens: int, window_tokens: int, reply_tokens: int) -> None:
        super().__init__(
            f"the prompt (~{prompt_tokens} tokens with the safety margin) leaves fewer than "
            f"{reply_tokens} tokens for the reply in the model's context window of "
            f"{window_tokens} tokens"
        )
        self.prompt_tokens = prompt_tokens
        self.window_tokens = window_tokens
        self.reply_tokens = reply_tokens
