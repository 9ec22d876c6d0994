"""A record an LLM writes is of its segment (`workers.encoder.grounded`): not an earlier
record it was shown written again, nor the reply format's example values; through the real
`openai` client against the scripted fake server."""

from __future__ import annotations

from pathlib import Path

import openai

from tests.fakes.openai_server import FakeOpenAI, valid
from tests.workers.builders import HASH_DIM, HashEmbedder, batch, index_batches
from tests.workers.conftest import Sleeps
from tests.workers.encoder.test_llm_encoder import MODEL, make_segment, record, reply
from workers.encoder.earlier import StoreEarlier
from workers.encoder.grounded import as_compared, of_the_segment
from workers.encoder.llm_encoder import LLMEncoder
from workers.store import EvidenceStore

SHOWN = "Ines keeps a dog named Rex in a small flat"


def test_a_copy_is_the_shown_text_again_and_a_restatement_in_any_words_is_not() -> None:
    shown = frozenset({as_compared(SHOWN)})
    before = as_compared("Lena: I'm Lena. My team uses PostgreSQL 15.")
    now = as_compared("Always answer in bullet points when I ask about databases.")

    def ok(text: str) -> bool:
        return of_the_segment(text, shown, before, now)

    assert not ok("  ines keeps a dog named REX in a small  flat")  # an earlier record
    assert not ok("My team uses PostgreSQL 15.")  # the reference context's words
    assert not ok("one complete standalone sentence")  # the format's example
    assert ok("Ines now keeps Rex in a house with a garden.")
    assert ok("Always answer in bullet points when I ask about databases.")  # its own turn
    assert ok("用户住在北京。")  # a restatement in any language
    # an earlier record its own turn says again: a restatement, not a copy
    again = as_compared(f"Ines said it again: {SHOWN}.")
    assert of_the_segment(SHOWN, shown, before, again)


async def encoded(server: FakeOpenAI, client: openai.AsyncOpenAI, tmp_path: Path, *records):  # type: ignore[no-untyped-def]
    store = EvidenceStore(str(tmp_path / "db"), HashEmbedder.model_name, HASH_DIM)
    index_batches(store, [batch("a", 0, [SHOWN], session="s0")], HashEmbedder())
    seg = make_segment(1).model_copy(update={"namespace": "a", "segment_id": "a/s1/0"})
    server.script(valid(reply(*records)))
    llm = LLMEncoder(client, MODEL, sleep=Sleeps(), earlier=StoreEarlier(store))
    return await llm.encode(seg, "")


async def test_a_record_shown_as_earlier_written_again_is_left_out_placeholders_with_it(
    server: FakeOpenAI, client: openai.AsyncOpenAI, tmp_path: Path
) -> None:
    copied = record(semantic_text=SHOWN, evidence_turns=[1])
    own = record(
        evidence_turns=[0],
        tags=["short keyword", "pets"],
        entities=["named entity worth searching for"],
    )
    out = await encoded(server, client, tmp_path, copied, own)
    assert [r.semantic_text for r in out.records] == [own["semantic_text"]]
    assert out.records[0].tags == ["pets"] and out.records[0].entities == []


async def test_a_reply_of_copies_only_gives_the_turns_own_sentences(
    server: FakeOpenAI, client: openai.AsyncOpenAI, tmp_path: Path
) -> None:
    out = await encoded(server, client, tmp_path, record(semantic_text=SHOWN, evidence_turns=[0]))
    assert out.records and out.encoder == "extractive"
    assert all(r.semantic_text != SHOWN for r in out.records)
    assert out.usage.calls == 1  # the call it made is still counted
