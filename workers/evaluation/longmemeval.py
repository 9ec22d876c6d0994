"""LongMemEval instances -> exchanges, gold, and the official retrieval metrics (DESIGN 11.4).

One instance is one namespace: its haystack sessions are ingested, then its single
question is asked. A user message and the assistant reply after it form one exchange,
the unit a chat client produces. Session and turn ids are sanitized to the `Name`
alphabet once, here, and used everywhere (exchanges, gold, rankings), so a ranking read
back from lychee compares with the gold without translation.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from dateutil import parser as dateparser
from pydantic import ValidationError

from schemas import Exchange, Role, Turn
from workers.datasets import Skipped, read_json, refusal, skip
from workers.errors import DatasetError
from workers.evaluation.baselines import render_turn_line
from workers.evaluation.metrics import longmemeval_metrics, mean_metrics
from workers.evaluation.report import LONGMEMEVAL_KS, LONGMEMEVAL_SCHEMA, LongMemEvalReport

Granularity = Literal["session", "turn"]

_NOT_NAME = re.compile(r"[^A-Za-z0-9._:@+-]")
_NAME_MAX = 128


def to_name(raw: str) -> str:
    """A valid `Name` for `raw`: itself when already valid, else a sanitized form.

    Replaced characters, a forced leading letter or truncation would let two ids
    collide, so any changed id carries 8 hex digits of the original's SHA-1.
    """
    clean = _NOT_NAME.sub("_", raw)
    if not clean or not clean[0].isalnum():
        clean = "x" + clean
    if clean == raw and len(clean) <= _NAME_MAX:
        return clean
    digest = hashlib.sha1(raw.encode()).hexdigest()[:8]
    return f"{clean[: _NAME_MAX - 9]}-{digest}"


def is_abstention(question_id: str) -> bool:
    """Abstention questions (`_abs` suffix) have no evidence; the official metrics skip them."""
    return question_id.endswith("_abs")


def parse_haystack_date(text: str | None) -> datetime | None:
    """LongMemEval writes `2023/05/20 (Sat) 02:21`; the weekday in brackets is dropped."""
    if not text:
        return None
    try:
        parsed: datetime = dateparser.parse(re.sub(r"\([^)]*\)", " ", text))
    except (ValueError, OverflowError) as exc:
        raise DatasetError(f"unreadable date {text!r}") from exc
    return parsed


@dataclass(frozen=True)
class LongMemEvalInstance:
    """One question with its haystack, as exchanges, and its gold at both levels."""

    question_id: str
    question_type: str
    question: str
    answer: Any
    question_date: datetime | None
    namespace: str
    exchanges: list[Exchange]
    session_ids: tuple[str, ...]
    gold_sessions: frozenset[str]
    gold_turns: frozenset[str]
    turn_session: Mapping[str, str] = field(default_factory=dict)

    @property
    def abstention(self) -> bool:
        return is_abstention(self.question_id)

    def turn_lines(self) -> list[tuple[str, str]]:
        """(turn id, `[date] role: text`) for every turn: the raw-turn baselines' corpus."""
        return [
            (tid, render_turn_line(ex.session_date, t.speaker or t.role.value, t.content, None))
            for ex in self.exchanges
            for tid, t in zip(ex.turn_ids(), ex.turns, strict=True)
        ]


def _session_exchanges(
    namespace: str,
    session_id: str,
    date: datetime | None,
    messages: Sequence[Any],
    path: str = "",
    skipped: list[Skipped] | None = None,
) -> tuple[list[Exchange], set[str]]:
    """Group messages into exchanges (user + following assistant); return them and gold turns.

    A message the contract refuses goes to `skipped` (`workers.datasets.skip`), left out
    alone as an empty one is: the reply after it stands as its own exchange."""
    groups: list[list[tuple[str, Turn]]] = []
    gold: set[str] = set()
    for index, msg in enumerate(messages):
        if not isinstance(msg, dict):
            raise DatasetError(f"session {session_id}, message {index}: expected an object")
        content = str(msg.get("content") or "")
        if not content.strip():
            continue  # a Turn needs text; the index still counts, so ids stay positional
        try:
            role = Role(str(msg.get("role")))
        except ValueError as exc:
            raise DatasetError(f"session {session_id}, message {index}: {exc}") from exc
        tid = f"{session_id}:{index}"
        if msg.get("has_answer"):
            gold.add(tid)
        try:
            turn = Turn(role=role, content=content, turn_id=tid)
        except ValidationError as exc:
            skip(skipped, Skipped(path, refusal(exc), namespace, session_id, tid))
            continue
        last = groups[-1] if groups else None
        if (
            role is Role.assistant
            and last is not None
            and len(last) == 1
            and last[0][1].role is Role.user
        ):
            last.append((tid, turn))
        else:
            groups.append([(tid, turn)])
    exchanges = [
        Exchange(
            namespace=namespace,
            session_id=session_id,
            seq=seq,
            exchange_id=group[0][0],
            session_date=date,
            turns=[t for _, t in group],
        )
        for seq, group in enumerate(groups)
    ]
    return exchanges, gold


def _instance(
    raw: Any, position: int, path: str = "", skipped: list[Skipped] | None = None
) -> LongMemEvalInstance:
    if not isinstance(raw, dict):
        raise DatasetError(f"instance {position}: expected an object")
    try:
        qid = str(raw["question_id"])
        sids = [str(s) for s in raw["haystack_session_ids"]]
        dates = list(raw["haystack_dates"])
        sessions = list(raw["haystack_sessions"])
        answer_sids = [str(s) for s in raw.get("answer_session_ids") or []]
        question = str(raw["question"])
    except (KeyError, TypeError) as exc:
        raise DatasetError(f"instance {position}: missing or malformed {exc}") from exc
    if not len(sids) == len(dates) == len(sessions):
        raise DatasetError(
            f"instance {qid}: {len(sids)} session ids, {len(dates)} dates, {len(sessions)} sessions"
        )
    namespace = to_name(qid)
    exchanges: list[Exchange] = []
    gold_turns: set[str] = set()
    session_names: list[str] = []
    for sid, date_text, messages in zip(sids, dates, sessions, strict=True):
        name = to_name(sid)
        session_names.append(name)
        if not isinstance(messages, list):
            raise DatasetError(f"instance {qid}, session {sid}: expected a list of messages")
        try:
            exs, gold = _session_exchanges(
                namespace, name, parse_haystack_date(date_text), messages, path, skipped
            )
        except ValueError as exc:  # pydantic errors and DatasetError alike
            raise DatasetError(f"instance {qid}, session {sid}: {exc}") from exc
        exchanges += exs
        gold_turns |= gold
    return LongMemEvalInstance(
        question_id=qid,
        question_type=str(raw.get("question_type", "")),
        question=question,
        answer=raw.get("answer"),
        question_date=parse_haystack_date(raw.get("question_date")),
        namespace=namespace,
        exchanges=exchanges,
        session_ids=tuple(session_names),
        gold_sessions=frozenset(to_name(s) for s in answer_sids),
        gold_turns=frozenset(gold_turns),
        turn_session={tid: ex.session_id for ex in exchanges for tid in ex.turn_ids()},
    )


def load_longmemeval(
    path: str | Path, skipped: list[Skipped] | None = None
) -> list[LongMemEvalInstance]:
    """Read a LongMemEval JSON file (a list of instances); DatasetError says where it fails.

    A message the contract refuses goes to `skipped` when given (`workers.datasets`)."""
    data = read_json(path)
    if not isinstance(data, list):
        raise DatasetError(f"{path}: expected a list of instances")
    return [_instance(raw, i, str(path), skipped) for i, raw in enumerate(data)]


def evaluate_rankings(
    instance: LongMemEvalInstance,
    ranked_ids: Sequence[str],
    granularity: Granularity = "turn",
    ks: Sequence[int] = LONGMEMEVAL_KS,
) -> dict[str, dict[str, float]]:
    """Official metrics for one ranking, keyed `{"session": {...}, "turn": {...}}`.

    With `granularity="turn"`, `ranked_ids` are turn ids, best first (flatten each
    item's provenance in order); the session ranking is their sessions, each kept at
    its first occurrence, so session@k means the first k distinct sessions, as the
    official turn-to-session evaluation does. An id this instance does not know stands
    for itself and never matches. With `"session"`, `ranked_ids` are session ids and
    `turn` is left empty.
    """
    if granularity == "session":
        return {"session": longmemeval_metrics(ranked_ids, instance.gold_sessions, ks), "turn": {}}
    sessions = [instance.turn_session.get(t, t) for t in ranked_ids]
    return {
        "session": longmemeval_metrics(sessions, instance.gold_sessions, ks),
        "turn": longmemeval_metrics(ranked_ids, instance.gold_turns, ks),
    }


def build_longmemeval_report(
    data: str,
    granularity: Granularity,
    rows: Iterable[tuple[str, Mapping[str, Mapping[str, float]]]],
    **extra: Any,
) -> LongMemEvalReport:
    """Average per-question metrics (question id, `evaluate_rankings` output), skipping `_abs`."""
    kept: list[Mapping[str, Mapping[str, float]]] = []
    skipped = 0
    for qid, metrics in rows:
        if is_abstention(qid):
            skipped += 1
        else:
            kept.append(metrics)
    levels: dict[Granularity, dict[str, float]] = {
        "session": mean_metrics(m.get("session", {}) for m in kept),
        "turn": mean_metrics(m.get("turn", {}) for m in kept),
    }
    return LongMemEvalReport.model_validate(
        {
            "schema": LONGMEMEVAL_SCHEMA,
            "data": data,
            "granularity": granularity,
            "questions": len(kept),
            "skipped_abstention": skipped,
            "metrics": levels,
            **extra,
        }
    )
