"""What a producer we did not write may put on the stages' own topics (`memory.segments`,
`memory.records`, `memory.turns`): ids that would reach another namespace's rows or cache,
lists that would write a table's worth of rows, dates the store cannot read back. Each is a
validation error naming the field, which the stages dead-letter as `schema`."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from schemas import Exchange, RawTurn, Role, Segment, Turn
from schemas.records import MAX_LABELS, MemoryRecord, MemoryType, RecordBatch, Temporal
from tests.workers.builders import make_batch, make_segment
from workers.encoder.encoded import build_record


def segment(**over: Any) -> dict[str, Any]:
    return make_segment("kx", "good", 1).model_dump(mode="json") | over


def batch(records: list[dict[str, Any]] | None = None, **over: Any) -> dict[str, Any]:
    seg = make_segment("kx", "good", 1)
    rec = build_record(seg, MemoryType.fact, "Ann moved to Porto.", ["t1"])
    data = make_batch(seg, [rec]).model_dump(mode="json")
    if records is not None:
        data["records"] = records
    return data | over


def record(**over: Any) -> dict[str, Any]:
    rec: dict[str, Any] = batch()["records"][0]
    return rec | over


def test_a_segment_id_of_another_namespace_is_refused() -> None:
    """The encoder caches and leases by segment id: another namespace's id must not pass."""
    Segment.model_validate(segment())
    for bad in ("kx/good/0", "evil/good/1", ""):
        with pytest.raises(ValidationError, match="segment_id must be 'kx/good/1'"):
            Segment.model_validate(segment(segment_id=bad))


def test_a_segment_exchange_with_more_ids_than_turns_is_refused() -> None:
    data = segment()
    data["exchanges"][0]["turn_ids"].append("t3")
    with pytest.raises(ValidationError, match="exchanges.0\n.*turn_ids has 3 ids for 2 turns"):
        Segment.model_validate(data)


def test_a_record_id_not_derived_from_its_namespace_and_text_is_refused() -> None:
    """Another namespace's record id would merge into that namespace's row."""
    other = batch()["records"][0]["record_id"]
    RecordBatch.model_validate(batch())
    evil = batch(namespace="evil", session_id="e", segment_id="evil/e/1", segment_index=1)
    evil["records"] = [
        record(namespace="evil", segment_id="evil/e/1", record_id=other, source_session="e")
    ]
    with pytest.raises(ValidationError, match="records.0\n.*record_id must be"):
        RecordBatch.model_validate(evil)
    with pytest.raises(ValidationError, match="record_id must be"):
        MemoryRecord.model_validate(record(record_id=""))


def test_a_batch_names_its_own_segment_and_its_records_come_from_it() -> None:
    with pytest.raises(ValidationError, match="segment_id must be 'kx/good/1'"):
        RecordBatch.model_validate(batch(segment_id="kx/good/7"))
    with pytest.raises(ValidationError, match="records.0.segment_id is not the batch's"):
        RecordBatch.model_validate(batch(records=[record(segment_id="kx/good/7")]))


def test_a_record_naming_more_entities_or_tags_than_a_record_holds_is_refused() -> None:
    """Each entity/tag pair is an evidence node with its own vector."""
    MemoryRecord.model_validate(record(entities=[f"e{i}" for i in range(MAX_LABELS)]))
    for field in ("entities", "tags"):
        with pytest.raises(ValidationError, match=field):
            MemoryRecord.model_validate(record(**{field: [f"x{i}" for i in range(MAX_LABELS + 1)]}))
        with pytest.raises(ValidationError, match=field):
            MemoryRecord.model_validate(record(**{field: ["x" * 10_000]}))


RAW_TURN = {
    "namespace": "ko",
    "session_id": "s",
    "turn_id": "t",
    "exchange_id": "e",
    "seq": 0,
    "index": 0,
    "role": "user",
    "text": "hi",
    "embedding": [0.1],
    "embedding_model": "m",
}


@pytest.mark.parametrize("when", ["9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+23:00"])
def test_a_raw_turn_dated_where_the_store_cannot_read_it_back_is_refused(when: str) -> None:
    RawTurn.model_validate(RAW_TURN)
    for field in ("created_at", "session_date"):
        with pytest.raises(ValidationError, match=field):
            RawTurn.model_validate(RAW_TURN | {field: when})
    with pytest.raises(ValidationError, match="kind"):
        RawTurn.model_validate(RAW_TURN | {"kind": "DROP TABLE"})


@pytest.mark.parametrize(
    ("vector", "why"),
    [
        ([1e308, 0.1], "less than or equal to 1000000"),  # its norm overflows float32
        ([-1e7, 0.1], "greater than or equal to -1000000"),
        ([0.0, 0.0], "all zeros"),
    ],
)
def test_a_raw_turns_vector_that_would_score_nan_is_refused(vector: list[float], why: str) -> None:
    """A vector whose norm is not a finite positive float32 makes every score of its
    namespace NaN, and each reply unreadable: it is refused at the contract."""
    with pytest.raises(ValidationError, match=f"embedding(?s:.*){why}"):
        RawTurn.model_validate(RAW_TURN | {"embedding": vector})
    RawTurn.model_validate(RAW_TURN | {"embedding": [1e5, -0.1]})


def test_a_year_zero_is_no_date() -> None:
    with pytest.raises(ValidationError, match="no year 0"):
        Temporal(t_ref="0000")


@pytest.mark.parametrize(
    ("where", "value", "field"),
    [
        (("exchanges", 0, "turn_ids", 0), "bad\x00id", "exchanges.0.turn_ids.0"),
        (("exchanges", 0, "turn_ids", 0), "", "exchanges.0.turn_ids.0"),
        (("exchanges", 0, "exchange_id"), "x" * 100_000, "exchanges.0.exchange_id"),
        (("exchanges", 0, "tokens"), -5, "exchanges.0.tokens"),
        (("exchanges", 0, "tokens"), 2**63 - 1, "exchanges.0.tokens"),
        (("tokens",), 2**63 - 1, "tokens"),  # past what the segment's records may say
        (("exchanges", 0, "fragment"), -1, "exchanges.0.fragment"),
        (("first_turn_id",), "", "first_turn_id"),
        (("last_turn_id",), "t\u2028x", "last_turn_id"),
    ],
)
def test_a_segment_with_ids_or_counts_no_exchange_could_give_is_refused(
    where: tuple[Any, ...], value: Any, field: str
) -> None:
    """A segment says what its exchanges said: ids the exchange contract refuses, or counts
    below zero, would become records whose evidence names no turn."""
    data = segment()
    held = data
    for key in where[:-1]:
        held = held[key]
    held[where[-1]] = value
    with pytest.raises(ValidationError, match=field.replace(".", r"\.")):
        Segment.model_validate(data)


def test_a_record_whose_evidence_no_turn_could_have_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"records\.0\.evidence\.0"):
        RecordBatch.model_validate(batch([record(evidence=["bad\x00id"])]))


def test_a_raw_turn_takes_the_id_made_for_a_turn_of_a_long_exchange_id() -> None:
    """A turn without a caller's id is `exchange_id#index`: an exchange id of 200 characters
    makes a turn id of 202, which the raw turn refused."""
    ex = Exchange(
        namespace="kx",
        session_id="good",
        seq=0,
        exchange_id="x" * 200,
        turns=[Turn(role=Role.user, content="hi")],
    )
    (tid,) = ex.turn_ids()
    raw = RAW_TURN | {"turn_id": tid, "exchange_id": ex.exchange_id}
    assert RawTurn.model_validate(raw).turn_id == "x" * 200 + "#0"
    with pytest.raises(ValidationError, match="turn_id"):
        RawTurn.model_validate(raw | {"turn_id": "t\x00"})
