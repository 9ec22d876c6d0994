"""What one streamed attempt produced: the reply's text, its timing and its token counts."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Completion:
    """What one streamed attempt produced; `usage` is the server's (None when it sent none).

    `first_token_s` is the time from sending the request to the first generated text,
    `seconds` the whole attempt; `chunks` counts the chunks that carried text (about one
    token each), the output size when the server reports no usage.
    """

    text: str
    seconds: float
    first_token_s: float | None
    chunks: int
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None

    @property
    def output_tokens(self) -> int:
        return self.completion_tokens if self.completion_tokens is not None else self.chunks

    @property
    def tokens_per_s(self) -> float | None:
        """Generation speed after the first token; None without two points in time."""
        if self.first_token_s is None:
            return None
        writing = self.seconds - self.first_token_s
        return self.output_tokens / writing if writing > 0 and self.output_tokens else None
