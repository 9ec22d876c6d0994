"""`lychee ask`'s text output carries the marks its `--json` has: a chain of three values
through the real indexer and query service, printed as a person reads it."""

from __future__ import annotations

from pathlib import Path

from schemas import QueryReply
from streams.cli.data import format_evidence
from tests.streams.gateway.test_mcp_arguments import item
from tests.workers.query.test_currency_chain import chain_reply


async def test_ask_text_marks_what_replaced_what_per_item(tmp_path: Path) -> None:
    reply = await chain_reply(tmp_path)
    ids = {e.text: e.item_id.rsplit("/", 1)[-1][:8] for e in reply.evidence if e.kind == "record"}
    first, middle, last = (
        ids[f"The flight to Lisbon {w}"]
        for w in ("leaves on March 3.", "now leaves on April 9.", "now leaves on April 20.")
    )
    lines = format_evidence(reply).splitlines()

    def marks_of(text: str) -> str:
        at = next(i for i, x in enumerate(lines) if x.split("] ", 1)[-1].startswith(text))
        return lines[at + 1].strip()

    assert (
        marks_of("The flight to Lisbon leaves on March 3.") == f"[replaced 2024-02-01 by {middle}]"
    )
    assert marks_of("The flight to Lisbon now leaves on April 9.") == (
        f"[replaced 2024-02-20 by {last}; had replaced {first}]"
    )
    assert marks_of("The flight to Lisbon now leaves on April 20.") == (
        f"[current since 2024-02-20, replaced {middle}]"
    )


def test_an_empty_reply_under_a_budget_says_the_budget_may_be_why() -> None:
    empty = QueryReply(correlation_id="c", namespace="me", status="ok", query="q")
    assert "nothing in namespace me matches" in format_evidence(empty)
    told = format_evidence(empty, token_budget=64)
    assert "no evidence within 64 tokens" in told and "without --token-budget" in told


def test_ask_text_names_the_values_of_a_statement_replaced_in_part() -> None:
    update = {"superseded_by": ["r2"], "replaced_values": ["32 GB"], "valid_to": "2024-08-02"}
    reply = QueryReply(
        correlation_id="c",
        namespace="me",
        status="ok",
        evidence=[item(1, 0.9).model_copy(update=update)],
    )
    marks = format_evidence(reply)
    assert "[32 GB replaced 2024-08-02 by r2 (its other values not said to change)]" in marks
