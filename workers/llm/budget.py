"""How a prompt and its reply share the model's context window.

A server refuses a request whose prompt, with room for the reply's token cap, does not fit
its window (llama.cpp: HTTP 400 "exceeds the available context size"). Prompts are counted
here with the project's tokenizer (`workers.tokens`), not the model's: the two differ by a
few percent on English and the chat template adds tokens of its own, so every count carries
a safety margin, a share of the prompt plus a fixed number of tokens.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from workers.llm.errors import ContextOverflow
from workers.tokens import prompt_tokens


@dataclass(frozen=True)
class ContextBudget:
    """A context window of `window_tokens`, the margin its prompts are counted with, and the
    fewest reply tokens a call is sent with (`min_reply_tokens`): a reply cap that would
    have to shrink below it means the prompt cannot be sent at all."""

    window_tokens: int
    margin_ratio: float = 0.10
    margin_tokens: int = 64
    min_reply_tokens: int = 64

    def __post_init__(self) -> None:
        if self.window_tokens < 1:
            raise ValueError(f"a context window must hold tokens, not {self.window_tokens}")

    def cost(self, tokens: int) -> int:
        """What a prompt of `tokens` (our count) may take of the window: with the margin."""
        return math.ceil(tokens * (1 + self.margin_ratio)) + self.margin_tokens

    def reply_cap(self, messages: Sequence[dict[str, str]], wanted: int | None) -> int:
        """The reply's token cap for `messages`: `wanted`, or less when the window leaves
        less beside the prompt; ContextOverflow when it leaves fewer than the reply needs
        (`min_reply_tokens`, or `wanted` when that is smaller)."""
        room = self.window_tokens - self.cost(prompt_tokens(messages))
        floor = min(self.min_reply_tokens, wanted) if wanted else self.min_reply_tokens
        if room < floor:
            raise ContextOverflow(self.window_tokens - room, self.window_tokens, floor)
        return room if wanted is None else min(wanted, room)

    def room(self, messages: Sequence[dict[str, str]], reply_tokens: int) -> int:
        """Tokens (our count) that may still be added to `messages`, their reply capped at
        `reply_tokens`; negative when the messages alone do not fit."""
        left = self.window_tokens - reply_tokens - self.margin_tokens
        return math.floor(left / (1 + self.margin_ratio)) - prompt_tokens(messages)
