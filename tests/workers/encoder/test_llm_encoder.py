"""The LLM encoder and the OpenAI embedder through the real `openai` clients (DESIGN §6.1, §6.3, §6.5).

The server is a scripted fake on loopback (`tests/fakes/openai_server.py`): everything
between the encoder and the socket is the real client.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import openai
import pytest

from schemas import Role, Segment, SegmentExchange, Turn
from schemas.records import MemoryType, Temporal
from schemas.supersession import LinkKind
from tests.fakes.openai_server import FakeOpenAI, slow, status, streamed, text, valid
from tests.workers.builders import HASH_DIM, HashEmbedder, batch, index_batches, segment_of
from tests.workers.conftest import Sleeps
from workers.embedding.openai_api import OpenAIEmbedder
from workers.encoder.earlier import StoreEarlier
from workers.encoder.encoded import record_batch
from workers.encoder.encoders import GuardedLLMEncoder
from workers.encoder.errors import InvalidEncoderOutput, LLMUnavailable
from workers.encoder.llm_encoder import LLMEncoder, parse_reply, reply_budget
from workers.encoder.prompts import SYSTEM_PROMPT, build_messages, reply_schema_for
from workers.errors import Unprocessable
from workers.llm.calls import make_client
from workers.llm.policy import is_retryable
from workers.store import EvidenceStore
from workers.tokens import prompt_tokens

MODEL = "fake-model"


def make_segment(n_exchanges: int = 2, *, dated: bool = True) -> Segment:
    exchanges = []
    for i in range(n_exchanges):
        turns = [
            Turn(role=Role.user, speaker="Ines", content=f"I adopted a dog named Rex {i}."),
            Turn(role=Role.assistant, speaker="Sam", content=f"That's great,\nInes {i}!"),
        ]
        exchanges.append(
            SegmentExchange(
                exchange_id=f"ex{i}",
                seq=i,
                turn_ids=[f"t{i}a", f"t{i}b"],
                turns=turns,
                tokens=20,
            )
        )
    return segment_of(exchanges, date=datetime(2023, 5, 8, 13, 56, tzinfo=UTC) if dated else None)


def record(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "memory_type": "event",
        "semantic_text": "Ines adopted a dog named Rex on 2023-05-07.",
        "entities": ["Ines", "Rex"],
        "temporal": {"t_ref": "2023-05-07", "t_valid_from": "", "t_valid_to": ""},
        "tags": ["Pets", "adoption"],
        "evidence_turns": [0, 2],
        "source_role": "user",
    }
    return base | over


def reply(*records: dict[str, Any], note: str = "Ines owns Rex.") -> dict[str, Any]:
    return {"records": list(records), "disambiguation_context": note}


def encoder(client: openai.AsyncOpenAI, sleeps: Sleeps | None = None, **kw: Any) -> LLMEncoder:
    json_mode = kw.pop("json_mode", None)
    policy = LLMEncoder.policy.with_(**kw)
    return LLMEncoder(client, MODEL, policy=policy, json_mode=json_mode, sleep=sleeps or Sleeps())


# --- success ---------------------------------------------------------------------------


async def test_encoder_valid_reply_maps_turn_ids_and_streams_at_temperature_zero_with_schema(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.script(valid(reply(record(), record(memory_type="fact", semantic_text="  "))))
    seg = make_segment()

    out = await encoder(client).encode(seg, "Ines: a painter.")

    assert len(out.records) == 1  # the blank record is skipped
    rec = out.records[0]
    assert rec.memory_type is MemoryType.event
    assert rec.evidence == ["t0a", "t1a"]
    assert rec.temporal == Temporal(t_ref="2023-05-07")
    assert rec.tags == ["pets", "adoption"] and rec.entities == ["Ines", "Rex"]
    assert rec.source_role == "user" and rec.segment_id == seg.segment_id
    assert out.disambiguation_context == "Ines owns Rex."
    assert out.encoder == f"llm:{MODEL}"

    (body,) = server.requests
    assert body["model"] == MODEL
    assert body["temperature"] == 0
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "memory_records", "schema": reply_schema_for(4), "strict": True},
    }
    assert body["messages"] == build_messages(seg, "Ines: a painter.")

    (usage,) = server.usages
    assert out.usage.input_tokens == usage["prompt_tokens"]
    assert out.usage.output_tokens == usage["completion_tokens"]
    assert out.usage.calls == 1 and out.usage.estimated is False
    assert out.usage.prompt_tokens == prompt_tokens(body["messages"])


async def test_encoder_without_json_mode_sends_no_response_format(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.script(text("```json\n" + json.dumps(reply(record())) + "\n```"))
    out = await encoder(client, json_mode=False).encode(make_segment(), "")
    assert "response_format" not in server.requests[0]
    assert len(out.records) == 1  # code fences are stripped


async def test_encoder_empty_evidence_falls_back_to_every_turn_and_note_is_capped(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.script(valid(reply(record(evidence_turns=[], temporal=None), note="x" * 5000)))
    seg = make_segment()
    out = await encoder(client).encode(seg, "")
    assert out.records[0].evidence == seg.turn_ids
    assert out.records[0].temporal == Temporal()
    assert len(out.disambiguation_context) == 1_200


async def test_encoder_empty_records_reply_is_a_valid_outcome(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    out = await encoder(client).encode(make_segment(), "")  # the server's default reply
    assert out.records == [] and out.disambiguation_context == ""
    assert out.usage.calls == 1


# --- repair ----------------------------------------------------------------------------


async def test_encoder_invalid_json_then_valid_makes_one_repair_call(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.script(text("Sure! Here are the records: {oops"), valid(reply(record())))
    seg = make_segment()

    out = await encoder(client).encode(seg, "")

    assert len(out.records) == 1 and out.records[0].evidence == ["t0a", "t1a"]
    assert len(server.requests) == 2
    first, repair = (r["messages"] for r in server.requests)
    assert repair[: len(first)] == first
    assert repair[-2] == {"role": "assistant", "content": "Sure! Here are the records: {oops"}
    assert repair[-1]["role"] == "user" and "not valid JSON" in repair[-1]["content"]
    assert out.usage.calls == 2
    assert out.usage.input_tokens == sum(u["prompt_tokens"] for u in server.usages)
    assert out.usage.output_tokens == sum(u["completion_tokens"] for u in server.usages)
    assert out.usage.prompt_tokens == prompt_tokens(first)


async def test_encoder_invalid_twice_raises_invalid_output_with_the_raw_reply(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.script(text("not json"), text("still not json"))
    with pytest.raises(InvalidEncoderOutput) as info:
        await encoder(client).encode(make_segment(), "")
    assert info.value.raw == "still not json"
    assert "JSON" in info.value.reason
    assert len(server.requests) == 2  # exactly one repair


@pytest.mark.parametrize(
    ("bad", "named"),
    [
        (record(memory_type="opinion"), "memory_type"),
        (record(evidence_turns=[0, 9]), "outside the turns 0..3"),
        (record(temporal={"t_ref": "last spring"}), "t_ref"),
        (record(temporal={"t_valid_from": "2023-02-30"}), "t_valid_from"),
    ],
)
async def test_encoder_schema_violation_is_repaired_with_the_error_named(
    server: FakeOpenAI, client: openai.AsyncOpenAI, bad: dict[str, Any], named: str
) -> None:
    server.script(valid(reply(bad)), valid(reply(record())))
    out = await encoder(client).encode(make_segment(), "")
    assert len(out.records) == 1 and out.usage.calls == 2
    assert named in server.requests[1]["messages"][-1]["content"]


def test_parse_reply_coerces_obvious_blanks_and_spellings() -> None:
    raw = json.dumps(
        {
            "records": [
                record(
                    memory_type="Failure Pattern",
                    temporal={"t_ref": None, "t_valid_from": "unknown", "t_valid_to": "2024"},
                    entities=None,
                    source_role="User",
                ),
                record(temporal={"t_ref": "2023-05-07T10:00:00Z"}),
            ],
            "disambiguation_context": None,
        }
    )
    out = parse_reply(raw, n_turns=4)
    first, second = out.records
    assert first.memory_type is MemoryType.failure_pattern
    assert (first.temporal.t_ref, first.temporal.t_valid_from) == ("", "")
    assert first.temporal.t_valid_to == "2024"
    assert first.entities == [] and first.source_role == "user"
    assert second.temporal.t_ref == "2023-05-07"
    assert out.disambiguation_context == ""


# --- transient failures ----------------------------------------------------------------


async def test_encoder_429_with_retry_after_waits_at_least_that_long(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.script(status(429, {"Retry-After": "1"}), valid(reply(record())))
    sleeps = Sleeps()
    out = await encoder(client, sleeps, base_delay_s=0.01).encode(make_segment(), "")
    assert len(out.records) == 1 and out.usage.calls == 1
    assert len(sleeps.delays) == 1 and sleeps.delays[0] >= 1.0
    assert len(server.requests) == 2


async def test_encoder_500_on_every_attempt_raises_unavailable(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.script(*[status(500, {}) for _ in range(3)])
    sleeps = Sleeps()
    with pytest.raises(LLMUnavailable) as info:
        await encoder(client, sleeps, max_attempts=3, base_delay_s=0.5).encode(make_segment(), "")
    assert len(server.requests) == 3
    assert len(sleeps.delays) == 2
    assert 0 <= sleeps.delays[0] <= 0.5 and 0 <= sleeps.delays[1] <= 1.0  # full jitter
    assert info.value.retry_after_s is None


async def test_encoder_backoff_is_deterministic_per_segment(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    runs = []
    for _ in range(2):
        server.script(status(503, {}), status(503, {}), valid(reply(record())))
        sleeps = Sleeps()
        await encoder(client, sleeps).encode(make_segment(), "")
        runs.append(sleeps.delays)
    assert runs[0] == runs[1] and len(runs[0]) == 2


async def test_encoder_retry_after_beyond_max_delay_hands_the_wait_to_the_caller(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.script(status(429, {"Retry-After": "120"}))
    sleeps = Sleeps()
    with pytest.raises(LLMUnavailable) as info:
        await encoder(client, sleeps, max_delay_s=30).encode(make_segment(), "")
    assert info.value.retry_after_s == 120.0
    assert sleeps.delays == [] and len(server.requests) == 1


async def test_encoder_no_first_token_within_its_limit_is_retried_after_settling_then_ok(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.script(slow(2.0), valid(reply(record())))
    sleeps = Sleeps()
    out = await encoder(client, sleeps, first_token_s=0.3).encode(make_segment(), "")
    assert len(out.records) == 1
    assert len(server.requests) == 2 and len(sleeps.delays) == 1
    assert sleeps.delays[0] >= LLMEncoder.policy.settle_s  # the server stops the first one


async def test_encoder_unreachable_server_raises_unavailable() -> None:
    with FakeOpenAI() as srv:
        url = srv.url
    c = make_client(url, None, timeout_s=2.0)
    try:
        with pytest.raises(LLMUnavailable):
            await encoder(c, max_attempts=2).encode(make_segment(), "")
    finally:
        await c.close()


async def test_encoder_client_error_is_not_retried(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    from workers.encoder.errors import EncoderError

    server.script(status(400, {}))
    with pytest.raises(EncoderError) as info:
        await encoder(client).encode(make_segment(), "")
    assert not isinstance(info.value, LLMUnavailable | InvalidEncoderOutput)
    assert len(server.requests) == 1


def test_is_retryable_names_the_transient_failures() -> None:
    import httpx

    req = httpx.Request("POST", "http://x/v1/chat/completions")

    def status_error(code: int) -> openai.APIStatusError:
        return openai.APIStatusError("x", response=httpx.Response(code, request=req), body=None)

    assert is_retryable(openai.APITimeoutError(request=req))
    assert is_retryable(openai.APIConnectionError(request=req))
    assert is_retryable(status_error(429)) and is_retryable(status_error(502))
    assert not is_retryable(status_error(400)) and not is_retryable(status_error(401))
    assert not is_retryable(ValueError("bug"))


# --- prompts ---------------------------------------------------------------------------


def test_build_messages_carries_the_date_context_and_indexed_turns() -> None:
    system, user = build_messages(make_segment(), "Ines: a painter.")
    assert system == {"role": "system", "content": SYSTEM_PROMPT}
    assert user["role"] == "user"
    content = user["content"]
    assert "<SESSION_DATE>2023-05-08</SESSION_DATE>" in content
    assert "<REFERENCE_CONTEXT>\nInes: a painter.\n</REFERENCE_CONTEXT>" in content
    turns = content.split("<CURRENT_TURNS>\n")[1].split("\n</CURRENT_TURNS>")[0].splitlines()
    assert turns == [
        "[0] Ines: I adopted a dog named Rex 0.",
        "[1] Sam: That's great, Ines 0!",
        "[2] Ines: I adopted a dog named Rex 1.",
        "[3] Sam: That's great, Ines 1!",
    ]


def test_build_messages_without_a_date_leaves_the_tag_empty() -> None:
    _, user = build_messages(make_segment(dated=False), "")
    assert "<SESSION_DATE></SESSION_DATE>" in user["content"]


def test_system_prompt_names_every_output_field_and_memory_type() -> None:
    for name in (
        "records",
        "semantic_text",
        "entities",
        "t_ref",
        "t_valid_from",
        "t_valid_to",
        "tags",
        "evidence_turns",
        "source_role",
        "disambiguation_context",
        *(t.value for t in MemoryType),
    ):
        assert name in SYSTEM_PROMPT


def test_prompt_tokens_is_positive_and_grows_with_turns() -> None:
    small = prompt_tokens(build_messages(make_segment(1), ""))
    large = prompt_tokens(build_messages(make_segment(6), ""))
    assert 0 < small < large


# --- embeddings ------------------------------------------------------------------------


def test_openai_embedder_returns_unit_rows_in_batches(server: FakeOpenAI) -> None:
    client = openai.OpenAI(base_url=server.url, api_key="x", max_retries=0)
    emb = OpenAIEmbedder(client, "fake-embed", batch_size=4)  # one probe request for dim
    assert emb.dim == server.embedding_dim and emb.model_name == "fake-embed"

    texts = [f"text {i}" for i in range(10)] + [""]
    out = emb.embed(texts)

    assert out.shape == (11, server.embedding_dim) and out.dtype == np.float32
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    assert len(server.embedding_requests) == 1 + 3  # probe + ceil(11 / 4)
    assert all(r["encoding_format"] == "float" for r in server.embedding_requests)
    again = emb.embed(["text 3"])
    assert np.allclose(again[0], out[3])  # same text, same vector, order kept
    assert emb.embed([]).shape == (0, server.embedding_dim)
    client.close()


def test_openai_embedder_given_dim_skips_the_probe(server: FakeOpenAI) -> None:
    client = openai.OpenAI(base_url=server.url, api_key="x", max_retries=0)
    emb = OpenAIEmbedder(client, dim=server.embedding_dim)
    assert server.embedding_requests == []
    assert emb.embed(["a"]).shape == (1, server.embedding_dim)
    client.close()


async def test_encoder_asks_for_a_budget_by_turns_and_repairs_a_reply_cut_there(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    seg = make_segment()  # 4 turns
    long = reply(
        *[record(semantic_text=f"Ines said thing number {i} of many.") for i in range(300)]
    )
    server.script(valid(long), valid(reply(record())))

    out = await encoder(client).encode(seg, "")

    assert len(out.records) == 1 and out.usage.calls == 2
    first, second = server.requests
    assert first["max_completion_tokens"] == second["max_completion_tokens"] == reply_budget(4)
    repair = second["messages"][-1]["content"]
    assert f"cut at its limit of {reply_budget(4)} tokens" in repair
    assert "fewer and shorter records" in repair


async def test_encoder_reply_still_written_at_the_total_limit_is_dead_letter_material_at_once(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    overlong = streamed(" ".join(["{"] * 200), gap_s=0.05)
    server.script(overlong)  # a retry or a repair would get the default, valid reply

    with pytest.raises(InvalidEncoderOutput, match="still being written at the total limit"):
        await encoder(client, first_token_s=5.0, gap_s=5.0, total_s=0.5).encode(make_segment(), "")
    assert len(server.requests) == 1  # no retry and no repair: each would take as long
    server.script(overlong)
    with pytest.raises(Unprocessable):
        await GuardedLLMEncoder(encoder(client, first_token_s=5.0, gap_s=5.0, total_s=0.5)).encode(
            make_segment(), ""
        )


# --- supersessions ---------------------------------------------------------------------


async def test_encoder_shows_earlier_records_and_links_what_the_reply_supersedes(
    server: FakeOpenAI, client: openai.AsyncOpenAI, tmp_path: Path
) -> None:
    store = EvidenceStore(str(tmp_path / "db"), HashEmbedder.model_name, HASH_DIM)
    old = batch("a", 0, ["Ines keeps a dog named Rex in a small flat"], session="s0")
    index_batches(store, [old], HashEmbedder())
    seg = make_segment()  # namespace "ns": the earlier record must be of the segment's own
    seg = seg.model_copy(update={"namespace": "a", "segment_id": "a/s1/0"})
    moved = record(semantic_text="Ines moved with Rex the dog to a house.", supersedes=[0])
    server.script(valid(reply(record(supersedes=[3]))), valid(reply(moved)))
    llm = LLMEncoder(client, MODEL, sleep=Sleeps(), earlier=StoreEarlier(store))

    out = await llm.encode(seg, "")

    first, repair = server.requests
    assert "[E0] (said 2024-03-02) Ines keeps a dog named Rex" in first["messages"][1]["content"]
    fields = first["response_format"]["json_schema"]["schema"]["properties"]["records"]
    assert fields["items"]["properties"]["supersedes"]["maxItems"] == 1
    assert "indexes [3] are not earlier records" in repair["messages"][-1]["content"]
    (link,) = out.supersessions
    assert link.older_id == old.records[0].record_id and link.newer_id == out.records[0].record_id
    assert link.kind is LinkKind.supersedes and link.found_by == f"llm:{MODEL}"
    assert link.changed_at == seg.session_date
    assert record_batch(seg, out).supersessions == [link]


async def test_encoder_without_earlier_records_allows_no_supersession(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    server.script(valid(reply(record())))
    out = await encoder(client).encode(make_segment(), "")
    assert out.supersessions == []
    body = server.requests[0]
    assert "<EARLIER_RECORDS>\n\n</EARLIER_RECORDS>" in body["messages"][1]["content"]
    fields = body["response_format"]["json_schema"]["schema"]["properties"]["records"]
    assert fields["items"]["properties"]["supersedes"]["maxItems"] == 0


async def test_a_models_labels_are_held_to_the_records_contract(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    """A model that names a 300-character entity, or more entities than a record holds,
    costs those labels, not the segment (the record's contract would refuse them)."""
    many = [f"Name{i}" for i in range(40)]
    server.script(valid(reply(record(entities=["Ines", "x" * 300, *many], tags=["  ", "Pets"]))))
    (rec,) = (await encoder(client).encode(make_segment(), "")).records
    assert rec.entities == ["Ines", *many[:31]]
    assert rec.tags == ["pets"]


def tools_only(seg: Segment) -> Segment:
    """`seg` with every turn not memory (`Turn.memory`): an agent's tool calls, say."""
    exchanges = [
        ex.model_copy(update={"turns": [t.model_copy(update={"memory": False}) for t in ex.turns]})
        for ex in seg.exchanges
    ]
    return seg.model_copy(update={"exchanges": exchanges})


async def test_turns_that_are_not_memory_are_not_shown_and_alone_ask_nothing(
    server: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    out = await encoder(client).encode(tools_only(make_segment()), "")
    assert out.records == [] and server.requests == [] and out.usage.calls == 0
    seg = make_segment(1)
    first = seg.exchanges[0]
    mixed = [first.turns[0], first.turns[1].model_copy(update={"memory": False})]
    seg = seg.model_copy(update={"exchanges": [first.model_copy(update={"turns": mixed})]})
    server.script(valid(reply(record(evidence_turns=[]))))
    out = await encoder(client).encode(seg, "")
    shown = server.requests[0]["messages"][-1]["content"]
    assert "I adopted a dog" in shown and "That's great" not in shown
    assert out.records[0].evidence == ["t0a"]  # the memory turns, not the segment's all
