"""The `turns` table: raw turns with the embedding the segmenter computed for them.

A turn longer than a passage also stores where its passages are (`workers.text.passages`):
evidence shows the passage a question matches, and the whole turn stays one row."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from schemas import RawTurn
from schemas.exchange import turn_text
from workers.forget import Source
from workers.store import lineage
from workers.store.arrow import ID, naive
from workers.store.database import DIM_KEY, MODEL_KEY, Database, Table
from workers.store.errors import EmbeddingMismatch, TurnReplaced
from workers.store.snapshots import column_names
from workers.store.sql import ID_CHUNK, chunks, id_in, namespace_filter, sql_quote
from workers.store.writes import upsert_rows
from workers.text.passages import PASSAGE_TOKENS, passages, to_json
from workers.tokens import count_tokens

TURNS = "turns"
TEXT_COLUMN = "text"
PASSAGES_COLUMN = "passages"
MEMORY_COLUMN = "memory"

_READ_COLUMNS = [
    "id",
    "namespace",
    "session_id",
    "turn_id",
    "exchange_id",
    "seq",
    "idx",
    "role",
    "speaker",
    "text",
    "session_date",
    PASSAGES_COLUMN,
]


def turns_schema(dim: int, model: str) -> pa.Schema:
    return pa.schema(
        [
            ID,
            ("namespace", pa.string()),
            ("session_id", pa.string()),
            ("turn_id", pa.string()),
            ("exchange_id", pa.string()),
            ("seq", pa.int64()),
            ("idx", pa.int32()),
            ("role", pa.string()),
            ("speaker", pa.string()),
            ("content", pa.string()),
            ("image_caption", pa.string()),
            ("text", pa.string()),
            (PASSAGES_COLUMN, pa.string()),
            ("session_date", pa.timestamp("us")),
            ("created_at", pa.timestamp("us", tz="UTC")),
            ("vector", pa.list_(pa.float32(), dim)),
            (lineage.COLUMN, pa.list_(pa.string())),
            (MEMORY_COLUMN, pa.bool_()),  # false: listed, never searched (Turn.memory)
        ],
        metadata={MODEL_KEY: model, DIM_KEY: str(dim)},
    )


# the columns later versions added, as a table of an earlier one gains them
_ADDED = (pa.field(PASSAGES_COLUMN, pa.string()), pa.field(MEMORY_COLUMN, pa.bool_()))


def turn_row_id(namespace: str, session_id: str, turn_id: str) -> str:
    return f"{namespace}/{session_id}/{turn_id}"


class TurnsTable(Table):
    name = TURNS
    text_column = TEXT_COLUMN

    def __init__(self, db: Database, passage_tokens: int = PASSAGE_TOKENS) -> None:
        super().__init__(db, turns_schema(db.dim, db.model))
        db.searched[TURNS] = MEMORY_COLUMN
        self.passage_tokens = passage_tokens
        self._migrated = False
        self._names: dict[tuple[str, int], list[str]] = {}  # the last large namespace's

    def migrate(self) -> None:
        """Writers only: a table of an earlier version gets the passages and memory columns,
        null in its rows (no passages: each turn shows whole; no flag: memory, as every turn
        was). Nullable, so a writer of that earlier version still appends its rows (a
        rolling upgrade); readers read what is there meanwhile."""
        tbl = None if self._migrated else super().table()
        if tbl is not None:
            added = [f for f in _ADDED if f.name not in tbl.schema.names]
            if added:
                tbl.add_columns(added)
            for f in _ADDED:  # an earlier version's migration added it non-null
                if not tbl.schema.field(f.name).nullable:
                    tbl.alter_columns({"path": f.name, "nullable": True})
        self._migrated = self._migrated or tbl is not None

    def read_columns(self) -> list[str]:
        tbl = self.table()
        names = column_names(tbl, TURNS) if tbl is not None else set(_READ_COLUMNS)
        return [c for c in _READ_COLUMNS if c in names]

    def upsert(
        self, turns: Sequence[RawTurn], sources: Sequence[Source | None] | None = None
    ) -> int:
        """One merge_insert for the batch (a repeated id, its redelivery, once).
        `sources[i]` is the exchange turn i was read from (its lineage)."""
        if not turns:
            return 0
        srcs = list(sources) if sources is not None else [None] * len(turns)
        for tr in turns:
            if tr.embedding_model != self.db.model or len(tr.embedding) != self.db.dim:
                raise EmbeddingMismatch(
                    f"turn {tr.turn_id} of {tr.namespace} carries {tr.embedding_model} "
                    f"({len(tr.embedding)}-d); the store holds {self.db.model} ({self.db.dim}-d): "
                    "every stage embeds with the same LYCHEE_EMBEDDING_BACKEND"
                )
        rows: dict[str, tuple[RawTurn, Source | None]] = {}
        for t, src in zip(turns, srcs, strict=True):
            rid = turn_row_id(t.namespace, t.session_id, t.turn_id)
            if rid in rows and _saying(rows[rid][0]) != _saying(t):
                raise _replaced(t, "comes twice in one batch with other")
            rows[rid] = (t, src)
        self.migrate()
        tbl = self.table(create=True)
        assert tbl is not None
        _check_unchanged(tbl, {rid: t for rid, (t, _) in rows.items()})
        data = pa.Table.from_pylist(
            [_turn_row(rid, t, src, self.passage_tokens) for rid, (t, src) in rows.items()],
            schema=tbl.schema,
        )
        upsert_rows(tbl, data)
        self.db.ensure_indexes(TURNS, tbl, TEXT_COLUMN)
        return len(rows)

    def search_vectors(
        self, namespace: str, vectors: np.ndarray, limit: int, session_id: str | None = None
    ) -> list[list[dict[str, Any]]]:
        """Nearest turns of a namespace (or one session of it), a list per query vector."""
        return self.db.search_vectors(
            TURNS, namespace, vectors, limit, _session(session_id), self.read_columns()
        )

    def search_text(
        self, namespace: str, text: str, limit: int, session_id: str | None = None
    ) -> list[dict[str, Any]]:
        return self.db.search_text(
            TURNS, TEXT_COLUMN, namespace, text, limit, _session(session_id), self.read_columns()
        )

    def warm(self, namespace: str) -> None:
        self.db.warm(TURNS, namespace, TEXT_COLUMN, self.read_columns())

    def near(self, namespace: str, spans: Sequence[tuple[str, int, int]]) -> list[dict[str, Any]]:
        """Turns of `namespace` in the given `(session_id, first_seq, last_seq)` spans."""
        tbl = self.table()
        if tbl is None or not spans:
            return []
        columns = self.read_columns()
        snap = self.db.snapshot(tbl, TURNS, namespace, columns)
        if snap is not None:
            sessions = snap.grouped("session_id", "seq")
            none = np.zeros(0, dtype=np.intp)
            found = [none]
            for s, lo, hi in spans:
                rows, seqs = sessions.get(s, (none, none))
                found.append(rows[np.searchsorted(seqs, lo) : np.searchsorted(seqs, hi, "right")])
            return snap.take(np.unique(np.concatenate(found)))  # in table order, each once
        ranges = " OR ".join(
            f"(session_id = {sql_quote(s)} AND seq >= {int(lo)} AND seq <= {int(hi)})"
            for s, lo, hi in spans
        )
        where = self.db.searched_rows(tbl, TURNS, f"{namespace_filter(namespace)} AND ({ranges})")
        q = tbl.search().where(where, prefilter=True).select(columns).limit(None)
        return list(q.to_list())

    def seqs(self, namespace: str, turns: Iterable[tuple[str, str]]) -> dict[tuple[str, str], int]:
        """Each `(session_id, turn_id)`'s exchange position in its session (`seq`); turns
        that are not stored are left out."""
        return {k: int(v) for k, v in self._column_of(namespace, turns, "seq").items()}

    def speakers(
        self, namespace: str, turns: Iterable[tuple[str, str]]
    ) -> dict[tuple[str, str], str]:
        """Who said each `(session_id, turn_id)`; turns not stored or without a speaker name
        are left out."""
        return {k: v for k, v in self._column_of(namespace, turns, "speaker").items() if v}

    def shares(self, namespace: str, words: Iterable[str]) -> dict[str, float] | None:
        """The fraction of the namespace's turns that hold each word (as the full-text index
        reads it); None when the namespace is not held in memory (too large, snapshots off,
        no turns table yet)."""
        tbl = self.table()
        snap = None if tbl is None else self.db.snapshot(tbl, TURNS, namespace, self.read_columns())
        if snap is None:
            return None
        index = snap.text_index(TEXT_COLUMN)
        return {w: index.share(w) for w in words}

    def names(self, namespace: str) -> list[str]:
        """Every speaker name the namespace's turns carry, sorted: the planner reads a
        question's people from them instead of guessing at capitalized words."""
        tbl = self.table()
        if tbl is None:
            return []
        snap = self.db.snapshot(tbl, TURNS, namespace, self.read_columns())
        if snap is not None:
            return sorted({v for v in snap.column("speaker") if v})
        key = (namespace, int(tbl.version))  # a namespace too large for a snapshot
        if key not in self._names:
            where = self.db.searched_rows(tbl, TURNS, namespace_filter(namespace))
            query = tbl.search().where(where).select(["speaker"])
            said = query.limit(None).to_arrow().column("speaker").to_pylist()
            self._names = {key: sorted({v for v in said if v})}
        return list(self._names[key])

    def roles(self, namespace: str, turns: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """Each `(session_id, turn_id)`'s role (user, assistant, system); turns not stored
        are left out."""
        return {k: v for k, v in self._column_of(namespace, turns, "role").items() if v}

    def _column_of(
        self, namespace: str, turns: Iterable[tuple[str, str]], column: str
    ) -> dict[tuple[str, str], Any]:
        tbl = self.table()
        wanted = {turn_row_id(namespace, s, t): (s, t) for s, t in turns}
        if tbl is None or not wanted:
            return {}
        snap = self.db.snapshot(tbl, TURNS, namespace, self.read_columns())
        if snap is not None:  # one column, not whole rows
            values = snap.column(column)
            return {wanted[i]: values[snap.row_of[i]] for i in wanted if i in snap.row_of}
        rows = [  # a namespace too large for a snapshot: the two columns, not the vectors
            row
            for chunk in chunks(list(wanted), ID_CHUNK)
            for row in tbl.search()
            .where(f"{namespace_filter(namespace)} AND {id_in(chunk)}", prefilter=True)
            .select(["id", column])
            .limit(None)
            .to_list()
        ]
        return {wanted[r["id"]]: r[column] for r in rows}

    def ids(self, namespace: str) -> set[str]:
        """Turn ids of a namespace as of the latest version, whoever wrote it."""
        tbl = self.table()
        if tbl is None:
            return set()
        rows = (
            tbl.search()
            .where(namespace_filter(namespace))
            .select(["turn_id"])
            .limit(None)
            .to_list()
        )
        return {r["turn_id"] for r in rows}


_SAYING = ["id", "role", "speaker", "content", "image_caption", MEMORY_COLUMN]  # a turn's digest


def _check_unchanged(tbl: Any, turns: dict[str, RawTurn]) -> None:
    """Refuse a turn stored already with other words: what its digest covers (role,
    speaker, content, caption, whether it is memory; `schemas.exchange.Turn.digest`). A
    redelivery, or the same words under another exchange (which the gateway and the
    segmenter take as the same turn), writes the row again; another message under its id (a
    producer of our topic that is not the segmenter) would change what the records citing
    it stand on."""
    for chunk in chunks(list(turns), ID_CHUNK):
        found = tbl.search().where(id_in(chunk)).select(_SAYING).limit(None).to_arrow()
        for row in found.to_pylist():
            t = turns[row["id"]]
            if row["content"] is None:  # a row of a table from before `content`
                continue
            stored = (row["role"], row["speaker"], row["content"], row["image_caption"])
            if (*stored, row[MEMORY_COLUMN] is not False) != _saying(t):
                raise _replaced(t, "is stored with other")


def _saying(t: RawTurn) -> tuple[str, str | None, str, str | None, bool]:
    return (t.role.value, t.speaker, t.text, t.image_caption, t.memory)


def _replaced(t: RawTurn, how: str) -> TurnReplaced:
    return TurnReplaced(
        f"turn {t.turn_id!r} of {t.namespace}/{t.session_id} {how} words, speaker, caption "
        "or memory flag: a stored turn is never replaced; forget it first"
    )


def _session(session_id: str | None) -> dict[str, set[str]]:
    return {"session_id": {session_id}} if session_id else {}


def _turn_row(rid: str, t: RawTurn, src: Source | None, passage_tokens: int) -> dict[str, Any]:
    shown = turn_text(t.text, None)  # what the row's text shows of the content: spans index it
    return {
        "id": rid,
        "namespace": t.namespace,
        "session_id": t.session_id,
        "turn_id": t.turn_id,
        "exchange_id": t.exchange_id,
        "seq": t.seq,
        "idx": t.index,
        "role": t.role.value,
        "speaker": t.speaker,
        "content": t.text,
        "image_caption": t.image_caption,
        "text": t.rendered(),
        PASSAGES_COLUMN: to_json(passages(shown, passage_tokens, count_tokens)),
        "session_date": naive(t.session_date),
        "created_at": t.created_at,
        "vector": t.embedding,
        lineage.COLUMN: [lineage.token(src)],
        MEMORY_COLUMN: t.memory,
    }
