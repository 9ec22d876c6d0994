"""Supersession links written with the records: the encoder's own, then the offline rules'.

Run by the indexer after a batch's records are stored (under the records writer's lock,
so one writer per namespace): the rules read back the batch's records and those about the
same subject (the records table's full-text index over each one's words, at most
`SUBJECT_CANDIDATES` each) with where each was said, and keep the links that touch a record
of the batch. What counts as too common to name an attribute is read from a sample of the
namespace (`COMMON_SAMPLE` records). So a batch costs the same in a namespace of a
thousand records or a million. A redelivered batch finds the same links, which the links
table stores once.
"""

from __future__ import annotations

from collections.abc import Container, Sequence, Set
from functools import cached_property
from typing import Any

import structlog

from schemas.records import RecordBatch
from schemas.supersession import Supersession
from workers.indexer.renamed import frames, renamings
from workers.indexer.statements import Statement
from workers.indexer.supersession import (
    MIN_SHARED,
    common_words,
    denied,
    link_statements,
    told,
)
from workers.indexer.values import values_of
from workers.store import EvidenceStore
from workers.store.records import sample_texts, statements, statements_about

log = structlog.get_logger("lychee.indexer")

MAX_STATEMENTS = 20_000  # the latest records read when the full-text index cannot answer
SUBJECT_CANDIDATES = 64  # records about the subject of each new one, compared with it
COMMON_SAMPLE = 2_000  # records read for the words too common to name an attribute


def links_of(store: EvidenceStore, batches: Sequence[RecordBatch]) -> list[Supersession]:
    """The batches' own links (found by the encoder), then the rules' that touch their records."""
    found = [link for b in batches for link in b.supersessions]
    for namespace in dict.fromkeys(b.namespace for b in batches):
        new = {
            r.record_id: r.semantic_text
            for b in batches
            if b.namespace == namespace
            for r in b.records
        }
        sample = sample_texts(store.db, namespace, COMMON_SAMPLE) if new else []
        common = common_words(sample)
        denials = sample_denials(sample, common)
        linkable = sorted(i for i, text in new.items() if may_link(text, denials, common))
        if not linkable:
            continue
        found += _touching(store, namespace, linkable, new.keys(), common)
    return found


def relinked(store: EvidenceStore, namespace: str, record_ids: Set[str]) -> list[Supersession]:
    """The rules' links that touch `record_ids` again, after a forget took the records they
    were linked to: with the middle of "$1,200, now $1,100, now $1,000" forgotten, $1,000
    still replaces $1,200."""
    if not record_ids:
        return []
    common = common_words(sample_texts(store.db, namespace, COMMON_SAMPLE))
    return _touching(store, namespace, sorted(record_ids), record_ids, common)


def _touching(
    store: EvidenceStore,
    namespace: str,
    read: Sequence[str],
    touching: Set[str],
    common: frozenset[str],
) -> list[Supersession]:
    """The rules' links among the records `read` and those about the same subjects that
    touch one of `touching`."""
    said = _statements(store, namespace, read)
    return [
        link
        for link in link_statements(namespace, said, common, _Speakers(store, namespace))
        if link.older_id in touching or link.newer_id in touching
    ]


class _Speakers(Container[str]):
    """The namespace's speaker names, lowercased, read when a rule first asks (a name change,
    or a value's owner that is neither "my" nor common): most batches never do, and the read
    is of every turn's speaker."""

    def __init__(self, store: EvidenceStore, namespace: str) -> None:
        self.store = store
        self.namespace = namespace

    @cached_property
    def names(self) -> frozenset[str]:
        return frozenset(n.lower() for n in self.store.turns.names(self.namespace))

    def __contains__(self, name: object) -> bool:
        return name in self.names


def sample_denials(sample: Sequence[str], common: frozenset[str]) -> list[frozenset[str]]:
    """What the denials of a namespace's sample say was never done."""
    return [d for t in sample if (d := denied(t, common)) is not None]


def may_link(text: str, denials: Sequence[frozenset[str]], common: frozenset[str]) -> bool:
    """Whether a rule could link a new record, so that its subject is worth reading: a value
    change needs a value in it, a denial, a name change and a name said to hold now ("I now
    work at ...") are one, and an account settles or contradicts only a denial it shares
    `MIN_SHARED` of the denied words with (`denials`: the namespace's sample, all of it up
    to `COMMON_SAMPLE` records; past that a denial outside the sample goes unlinked, never
    wrongly linked). A record that cannot is still read as a candidate of the others."""
    if values_of(text, common) or denied(text, common) is not None or renamings(text):
        return True
    if any(f.now for f in frames(text, None)):
        return True
    words = told(text)
    return any(len(words & d) >= MIN_SHARED for d in denials)


def _statements(store: EvidenceStore, namespace: str, new: Sequence[str]) -> list[Statement]:
    try:
        rows = statements_about(store.db, namespace, new, SUBJECT_CANDIDATES)
    except (ValueError, RuntimeError, OSError) as exc:
        # no full-text index to ask (not built yet): the namespace's latest records instead
        log.warning("indexer.linking_unbounded", namespace=namespace, error=str(exc)[:200])
        rows = statements(store.db, namespace, MAX_STATEMENTS)
    firsts = {(r["source_session"], (r["evidence"] or [""])[0]) for r in rows}
    seqs = store.turns.seqs(namespace, firsts)
    return [_statement(r, seqs) for r in rows]


def _statement(row: dict[str, Any], seqs: dict[tuple[str, str], int]) -> Statement:
    session = row["source_session"] or ""
    first = (row["evidence"] or [""])[0]
    return Statement(
        record_id=row["id"],
        text=row["semantic_text"] or "",
        role=row["source_role"] or "",
        session_id=session,
        said_at=row["created_at"],
        position=(_segment_index(row["segment_id"] or ""), seqs.get((session, first), -1)),
    )


def _segment_index(segment_id: str) -> int:
    """`namespace/session/n` -> n (-1 when the id has another form)."""
    tail = segment_id.rsplit("/", 1)[-1]
    return int(tail) if tail.isdigit() else -1
