"""A record an LLM writes is of its segment's turns (`workers.encoder.grounded`), through the
real `openai` client against the scripted fake server."""

from __future__ import annotations

import openai

from tests.fakes.openai_server import FakeOpenAI, valid
from tests.workers.encoder.test_llm_encoder import encoder, make_segment, record, reply
from workers.encoder.grounded import grounded, segment_terms


def test_a_paraphrase_shares_the_turns_stems_and_a_copied_record_does_not() -> None:
    said = segment_terms(["Always answer in bullet points when I ask about databases."])
    assert grounded("The user wants bulleted answers to database questions.", said)
    assert not grounded("Lena's team uses PostgreSQL 15 in production.", said)
    assert not grounded("one complete standalone sentence", said)  # the format's example


async def test_a_record_of_other_turns_is_left_out_and_placeholders_with_it(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    copied = record(semantic_text="Lena's team uses PostgreSQL 15.", entities=["Lena"])
    own = record(tags=["short keyword", "pets"], entities=["named entity worth searching for"])
    server.script(valid(reply(copied, own)))
    out = await encoder(client).encode(make_segment(), "Lena: PostgreSQL 15.")
    assert [r.semantic_text for r in out.records] == [own["semantic_text"]]
    assert out.records[0].tags == ["pets"] and out.records[0].entities == []


async def test_a_reply_with_nothing_of_the_segment_gives_the_turns_own_sentences(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    copied = record(
        semantic_text="Lena's team uses PostgreSQL 15.", entities=["Lena"], evidence_turns=[0]
    )
    server.script(valid(reply(copied)))
    seg = make_segment(1)
    out = await encoder(client).encode(seg, "Lena: PostgreSQL 15.")
    assert out.records and out.encoder == "extractive"
    assert all("PostgreSQL" not in r.semantic_text for r in out.records)
    assert any("Rex" in r.semantic_text for r in out.records)
    assert out.usage.calls == 1  # the call it made is still counted
