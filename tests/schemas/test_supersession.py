"""Supersession in the contracts: new fields default, so messages of the earlier versions
still parse, and the versions that carry them say so."""

from __future__ import annotations

from datetime import datetime

import pytest
from pydantic import ValidationError

from schemas import EvidenceItem, QueryReply
from schemas.records import RecordBatch
from schemas.supersession import LinkKind, Supersession

BATCH_V2 = {
    "schema_version": 2,
    "kind": "record_batch",
    "namespace": "a",
    "session_id": "s1",
    "segment_id": "a/s1/0",
    "segment_index": 0,
    "first_turn_id": "t1",
    "last_turn_id": "t2",
    "encoder": "extractive",
}


def link(ns: str = "a") -> Supersession:
    return Supersession(
        namespace=ns,
        kind=LinkKind.supersedes,
        older_id="r1",
        newer_id="r2",
        changed_at=datetime(2024, 4, 2),
        found_by="llm:some-model",
    )


def test_a_record_batch_of_version_2_parses_without_supersessions() -> None:
    b = RecordBatch.model_validate(BATCH_V2)
    assert b.supersessions == [] and RecordBatch.latest_version == 3
    assert RecordBatch.model_validate(BATCH_V2 | {"schema_version": 3}).schema_version == 3


def test_a_record_batch_refuses_a_link_of_another_namespace() -> None:
    RecordBatch.model_validate(BATCH_V2 | {"schema_version": 3, "supersessions": [link()]})
    with pytest.raises(ValidationError, match="namespace"):
        RecordBatch.model_validate(BATCH_V2 | {"supersessions": [link("b")]})


def test_a_reply_of_version_1_parses_and_its_evidence_has_no_marks() -> None:
    item = {
        "kind": "turn",
        "item_id": "a/s1/t1",
        "text": "x",
        "turn_ids": ["t1"],
        "session_id": "s1",
    }
    reply = QueryReply.model_validate(
        {
            "schema_version": 1,
            "correlation_id": "c",
            "namespace": "a",
            "status": "ok",
            "evidence": [item],
        }
    )
    (e,) = reply.evidence
    assert e.superseded_by == e.supersedes == e.conflict == [] and e.valid_to is None
    assert QueryReply(correlation_id="c", namespace="a", status="ok").schema_version == 4
    marked = EvidenceItem.model_validate(item | {"superseded_by": ["r2"], "valid_to": "2024-04-02"})
    assert marked.superseded_by == ["r2"]


def test_the_same_pair_and_kind_is_one_link_whoever_found_it() -> None:
    other = link().model_copy(update={"found_by": "rule:value-change", "reason": "x"})
    assert link().link_id == other.link_id
    assert link().link_id != link().model_copy(update={"kind": LinkKind.conflict}).link_id
