"""A user's standing instructions: their scope, where one goes in a reply, and the service."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest

from schemas import QueryRequest
from schemas.records import MemoryType
from tests.workers.builders import HASH_DIM, HashEmbedder, index_batches, make_batch, make_segment
from workers.encoder.encoded import build_record
from workers.query.instructions import scope_of, with_instruction
from workers.query.presets import SERVED
from workers.query.selection import Candidate, Fused
from workers.query.service import QueryDeps, QueryService
from workers.store import EvidenceStore


@pytest.mark.parametrize(
    ("text", "scope"),
    [
        ("Always include units when I ask about measurements.", "measurements"),
        ("Always show the SQL when Dana Reyes asks about slow queries", "slow queries"),
        ("Never use tables whenever the user asks for a summary!", "a summary"),
        ("Use bullet points when asking about release notes.", "release notes"),
        ("Always use metric units.", None),
        (
            "Whenever Ann asks about a database migration, give Ann the rollback first.",
            ("a database migration"),
        ),
        (
            "Be brief. When I ask about dates, times or places, answer in one line.",
            "dates, times or places",
        ),
        ("When I ask about dates, times or places, I want one line.", "dates, times or places"),
        ("Show code when I ask about React, Vue or Svelte.", "React, Vue or Svelte"),
        ("Cite sources when I ask about history, and keep it short.", "history"),
        ("Use tables when I ask about prices; never guess.", "prices"),
        ("From now on, whenever I ask about hotels, quote prices in euros.", "hotels"),
        ("Also, when I ask about trains, list the times.", "trains"),
        ("I asked about the deadline when we met.", None),
        (
            "When I ask you about file operations, always answer with a one-liner.",
            "file operations",
        ),
        (
            "When the user asks you about file operations, always answer in one line.",
            "file operations",
        ),
        ("Always give me the SQL first when I ask you a data question.", "a data question"),
        (
            "From now on, for anything about file operations, give me a one-liner.",
            "file operations",
        ),
        ("Use plain words on any question about taxes.", "taxes"),
        ("When I ask you a lot of questions, keep each answer short.", None),
        ("Always reply in English, for questions about anything else too.", None),
        ("Never book flights on any request about travel before asking me.", "travel"),
    ],
)
def test_an_instruction_names_its_scope_in_its_own_words(text: str, scope: str | None) -> None:
    assert scope_of(text) == scope


def fused(item_id: str, score: float, *turns: str) -> Fused:
    c = Candidate(item_id, "window", item_id, "s1", turns or (item_id,))
    return Fused(c, rrf=score, best=score, route_score=1.0, routes=("r0",))


def ids(items: list[Fused]) -> list[str]:
    return [f.item_id for f in items]


RULE = fused("rule", 0.0, "t9")


def test_the_instruction_takes_the_weakest_place_of_the_head_and_that_item_moves_after_it() -> None:
    chosen = [fused("a", 0.9), fused("b", 0.2), fused("c", 0.5), fused("d", 0.4), fused("e", 0.3)]
    assert ids(with_instruction(chosen, RULE, 4)) == ["a", "rule", "c", "d", "b", "e"]
    # the first item stays, however weak
    first_weakest = [fused("a", 0.1), fused("b", 0.5), fused("c", 0.4)]
    assert ids(with_instruction(first_weakest, RULE, 3)) == ["a", "b", "rule", "c"]


def test_an_instruction_found_further_down_moves_up_and_is_not_repeated() -> None:
    chosen = [fused("a", 0.9), fused("b", 0.2), fused("c", 0.5), RULE, fused("e", 0.3)]
    assert ids(with_instruction(chosen, RULE, 3)) == ["a", "rule", "c", "b", "e"]


def test_no_move_when_the_head_shows_its_turn_or_holds_only_the_first_item() -> None:
    window = fused("w", 0.3, "t8", "t9")  # shows the instruction's turn
    chosen = [fused("a", 0.9), window, fused("c", 0.1)]
    assert ids(with_instruction(chosen, RULE, 3)) == ["a", "w", "c"]
    assert ids(with_instruction([RULE, fused("a", 0.9)], RULE, 2)) == ["rule", "a"]
    assert ids(with_instruction([fused("a", 0.9), fused("b", 0.1)], RULE, 1)) == ["a", "b"]
    assert ids(with_instruction([fused("a", 0.9)], RULE, 3)) == ["a", "rule"]  # room left


INSTRUCTION = "Always answer with a shell one-liner first when I ask about file operations."
# what the question's words find first: statements about the user's file operations
FACTS = [
    f"I run the file operations {a} and {b} every night."
    for a, b in [("copy", "rename"), ("compress", "move"), ("delete", "sync"), ("split", "merge")]
]


@pytest.fixture(params=[0, 100_000], ids=["lancedb", "snapshots"])
def store(tmp_path: Path, request: pytest.FixtureRequest) -> EvidenceStore:
    rows = request.param  # the namespace read from LanceDB at every request, or kept in memory
    s = EvidenceStore(str(tmp_path / "db"), HashEmbedder.model_name, HASH_DIM, snapshot_rows=rows)
    batches = []
    for i, text in enumerate([*FACTS, INSTRUCTION]):
        seg = make_segment("p", "s1", i, (f"t{i}a", f"t{i}b"))
        kind = MemoryType.constraint if text == INSTRUCTION else MemoryType.fact
        rec = build_record(seg, kind, text, [f"t{i}a"], source_role="user")
        batches.append(make_batch(seg, [rec]))
    index_batches(s, batches, HashEmbedder())
    return s


def ask(question: str, k: int) -> QueryRequest:
    deadline = int((time.time() + 30) * 1000)
    return QueryRequest(
        correlation_id="c",
        namespace="p",
        query=question,
        k=k,
        reply_partition=0,
        deadline_ms=deadline,
    )


@pytest.mark.asyncio
async def test_a_request_under_an_instructions_scope_gets_it_among_its_first_items(
    store: EvidenceStore,
) -> None:
    question = ask("What file operations do I run?", k=3)
    served = await QueryService(QueryDeps(store, HashEmbedder())).search(question)
    off = replace(SERVED, instruction_cosine=0.0)
    without = await QueryService(QueryDeps(store, HashEmbedder()), preset=off).search(question)
    assert all("Always answer" not in e.text for e in without.evidence)  # ranked past k
    found = [
        e for e in served.evidence if e.text.startswith("Always answer with a shell one-liner")
    ]
    assert len(served.evidence) == 3 and len(found) == 1
    assert found[0].memory_type == "constraint" and found[0].turn_ids == ["t4a"]
    assert found[0].scores["instruction"] >= SERVED.instruction_cosine
    # a request outside its scope is left as recall found it
    pets = ask("Which pets does Ann keep?", k=3)
    kept = await QueryService(QueryDeps(store, HashEmbedder())).search(pets)
    found_by_recall = await QueryService(QueryDeps(store, HashEmbedder()), preset=off).search(pets)
    assert [e.item_id for e in kept.evidence] == [e.item_id for e in found_by_recall.evidence]
    assert all("instruction" not in e.scores for e in kept.evidence)


@pytest.mark.asyncio
async def test_the_scope_vectors_cache_starting_again_changes_no_reply(
    store: EvidenceStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    question = ask("What file operations do I run?", k=3)
    kept = await QueryService(QueryDeps(store, HashEmbedder())).search(question)
    monkeypatch.setattr("workers.query.instructions.CACHED", 0)  # cleared at every request
    svc = QueryService(QueryDeps(store, HashEmbedder()))
    for _ in range(2):
        again = await svc.search(question)
        assert [e.item_id for e in again.evidence] == [e.item_id for e in kept.evidence]
