"""Token usage of LLM calls: the server's counts, estimated only when it sends none."""

from __future__ import annotations

from schemas.records import TokenUsage
from workers.llm.completion import Completion
from workers.llm.replies import content
from workers.tokens import count_tokens, prompt_tokens


def usage_of(completion: Completion, messages: list[dict[str, str]]) -> TokenUsage:
    """One call's usage: real counts from the server, estimated only when it sends no
    `usage` (`prompt_tokens(messages)` in, the reply's `count_tokens` out)."""
    prompt = prompt_tokens(messages)
    if completion.prompt_tokens is not None and completion.completion_tokens is not None:
        return TokenUsage(
            input_tokens=completion.prompt_tokens,
            output_tokens=completion.completion_tokens,
            prompt_tokens=prompt,
            calls=1,
        )
    return TokenUsage(
        input_tokens=prompt,
        output_tokens=count_tokens(content(completion)),
        estimated=True,
        prompt_tokens=prompt,
        calls=1,
    )


def total_usage(usages: list[TokenUsage]) -> TokenUsage:
    """Several calls for one result: counts summed, estimated if any part was, and the
    prompt size of the first call (the prompt proper; later calls are its repairs)."""
    return TokenUsage(
        input_tokens=sum(u.input_tokens for u in usages),
        output_tokens=sum(u.output_tokens for u in usages),
        estimated=any(u.estimated for u in usages),
        prompt_tokens=usages[0].prompt_tokens if usages else 0,
        calls=sum(u.calls for u in usages),
    )
