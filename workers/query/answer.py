"""Answer generation from the selected evidence (DESIGN §8.5, paper App. E.3).

One chat completion reads the two evidence blocks of `serialize_context` and the question,
and replies with a short answer phrase. The evidence it is given fits the model's context
window (`evidence_budget`). Unlike the planner there is no fallback: a failed call (refused,
unavailable, an empty reply, a reply cut at its token cap) raises `AnswerUnavailable` with
its reason, and the query service says it on the reply in place of an answer.
"""

from __future__ import annotations

import random

from schemas.records import TokenUsage
from workers.llm.calls import ChatCaller
from workers.llm.completion import Completion
from workers.llm.errors import CompletionError
from workers.llm.replies import content
from workers.llm.usage import usage_of
from workers.query.errors import AnswerUnavailable

# --- the prompt ------------------------------------------------------------------------

ANSWER_SYSTEM_PROMPT = """\
You answer questions about people using memories of their conversations.

# CONTEXT

The memories come from a conversation, usually between two speakers, and carry dates. \
They arrive in two blocks:
1. Episodic/Semantic Memories: short, fact-like statements and summaries distilled from \
the conversation.
2. Raw Memories: verbatim snippets of the conversation itself.

Reading rules:
1. The two blocks can repeat each other. Count a fact, event or item once, however many \
memories mention it; do not double count.
2. Read both blocks and keep only what actually helps with the question.
3. Within each block, memories are ordered by relevance, most relevant first.
4. When the question names a person, answer about that person only. Never put a fact \
about the other speaker in its place.
5. In Raw Memories, a name prefix in the text (for example "Ana:" or "Bruno:") tells who \
is speaking; use it to resolve "I", "me" and "my".
6. `Date:` on an Episodic/Semantic memory is the resolved date of the event or fact it \
states.
7. `Mentioned:` on a Raw Memory is the date of the conversation in which the snippet was \
said, which is not necessarily when the event happened.
8. `[replaced on <date> by a later statement]` marks a memory whose value a later memory \
changed (with `[it had replaced an earlier statement]` when it had itself changed an \
older one); `[current since <date>; replaces an earlier statement]` marks the one that \
changed it and still holds; `[contradicted by another statement; nothing later settles it]` marks two memories that \
cannot both hold.

# INSTRUCTIONS

1. Read every memory before answering.
2. Pay attention to dates whenever time matters.
3. For a question about a specific event or fact, look for direct, explicit evidence.
4. For a question asking for advice, a recommendation or a preferred kind of response, \
first find the named person's preferences, habits, constraints and past actions, and base \
the suggestion mainly on them.
5. If memories contradict each other, the most recent one wins. For a question about the \
present, answer with the current value and, when it helps, the one it replaced ("it was X, \
now Y"); for a question about the past, answer with the replaced value. When two memories \
are marked as contradicting each other, say both and that they disagree.
6. Turn relative time references ("yesterday", "last week", "two years ago") into \
concrete dates, counted from the date of the memory that contains them.
7. Do not confuse when something was said (`Mentioned:`) with when it happened (`Date:`).
8. Do not reply that there is no information when related memories can reasonably \
support an answer. Abstain only when there is truly no relevant evidence.
9. Prefer the exact words, or a short phrase, from the memories.
10. Answer in at most 5-6 words. Add an explanation only when the answer would otherwise \
be ambiguous.

# APPROACH (think it through silently)

1. Decide whether the question asks for a fact or for advice or a preference.
2. Gather every memory clearly related to the question.
3. Check dates and content to find the most reliable evidence.
4. For a fact, find the explicit mention that answers it; for advice, ground the answer \
in facts about the person.
5. Do any date arithmetic internally and state the result as a concrete date or time span.
6. Output only the answer phrase: no preamble, no label, no reasoning."""


def build_answer_messages(
    question: str, context: str, time_basis: str = ""
) -> list[dict[str, str]]:
    """[system, user]: the answer rules; then the optional time basis (e.g. today's date),
    the evidence blocks as `serialize_context` writes them, the question and `Answer:`."""
    parts = [time_basis.strip()] if time_basis.strip() else []
    parts += [context.strip(), f"Question: {question.strip()}", "Answer:"]
    return [
        {"role": "system", "content": ANSWER_SYSTEM_PROMPT},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


# --- the answerer ----------------------------------------------------------------------


class LLMAnswerer(ChatCaller):
    """One chat completion per question (temperature 0, free text), retried only on
    `is_retryable` errors with full-jitter backoff that honours Retry-After.

    A Retry-After longer than `max_delay_s` ends the attempts at once: the question's
    client is waiting, and an error note is better than a long sleep.
    """

    json_mode = False  # a short free-text answer
    max_output_tokens = 1024  # "at most 5-6 words", with room for a model that reasons first

    async def answer(
        self, question: str, context: str, *, time_basis: str = ""
    ) -> tuple[str, TokenUsage]:
        """The stripped answer phrase and the usage of the call; AnswerUnavailable when no
        answer came back, ValueError for a blank question."""
        if not question.strip():
            raise ValueError("the question is blank")
        messages = build_answer_messages(question, context, time_basis)
        completion = await self._complete(messages, self._rng or random.Random(question))
        usage = usage_of(completion, messages)
        answer = content(completion).strip()
        if not answer:
            raise AnswerUnavailable("the answer model replied with an empty message", usage=usage)
        if completion.finish_reason == "length":
            raise AnswerUnavailable(
                f"the answer was cut at its cap of {usage.output_tokens} tokens before it ended",
                usage=usage,
            )
        return answer, usage

    async def evidence_budget(self, question: str, time_basis: str = "") -> int | None:
        """Tokens the evidence blocks may take in the answer prompt for `question`, its
        reply capped at `max_output_tokens`, within the model's context window; None when
        no window is known. Never below 0."""
        budget = await self.context_budget()
        if budget is None:
            return None
        bare = build_answer_messages(question, "", time_basis)
        joins = 2  # the blank line that joins the blocks to the question
        return max(budget.room(bare, self.max_output_tokens or 0) - joins, 0)

    async def _complete(self, messages: list[dict[str, str]], rng: random.Random) -> Completion:
        """`ChatCaller._call` in free text (no JSON mode); no completion is AnswerUnavailable."""
        try:
            return await self._call(messages, rng)
        except CompletionError as err:
            raise AnswerUnavailable(err.reason, retry_after_s=err.retry_after_s) from err.error
