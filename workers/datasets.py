"""Conversation files -> exchanges: the LoCoMo layout and a JSON-lines layout.

LoCoMo (`locomo10.json`): one namespace per sample (its `sample_id`), one session per
`session_N` dated by `session_N_date_time`, one exchange per turn with `dia_id` as the
turn id and `blip_caption` kept as the image caption.

JSON lines: one exchange per line in the `Exchange` layout; `namespace` may come from
the caller. A line without `seq` is numbered by whoever produces it (`lychee ingest`
continues after the session's last accepted seq, so a second file can continue a session);
until then it carries its order within the session in this file, and it is listed in its
session's `unnumbered`. `exchange_id` defaults to `session_id:n:digest`, n that order and
digest a hash of the turns, so the same file ingested again is recognised exchange by exchange.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
from dateutil import parser as dateparser
from pydantic import ValidationError

from schemas import ContractError, Exchange, Role, Turn
from workers.errors import DatasetError

_SESSION_RE = re.compile(r"^session_(\d+)$")


@dataclass
class Session:
    session_id: str
    date: datetime | None
    exchanges: list[Exchange]
    unnumbered: frozenset[str] = frozenset()  # exchange ids whose file gave no seq


@dataclass
class QA:
    """One question; `kind` and `sources` come from a file that types its questions
    (`beam_type`) and names the turns behind a pair of statements (`beam_sources`: a field
    name -> turn ids, such as the older and the newer value of a fact)."""

    question: str
    answer: Any
    evidence: list[str]
    category: int
    kind: str | None = None
    sources: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class Conversation:
    namespace: str
    sessions: list[Session]
    qa: list[QA] = field(default_factory=list)
    speakers: tuple[str, ...] = ()

    @property
    def exchanges(self) -> Iterator[Exchange]:
        for s in self.sessions:
            yield from s.exchanges

    @property
    def turn_count(self) -> int:
        return sum(len(e.turns) for e in self.exchanges)


def parse_date(text: str | None) -> datetime | None:
    """LoCoMo writes `1:56 pm on 8 May, 2023`; dateutil reads it (and ISO) fuzzily."""
    if not text:
        return None
    try:
        parsed: datetime = dateparser.parse(text, fuzzy=True)
        return parsed
    except (ValueError, OverflowError) as exc:
        raise DatasetError(f"unreadable date {text!r}") from exc


def read_json(path: str | Path) -> Any:
    """A JSON file's value; DatasetError naming the file when it is not JSON (or not UTF-8)."""
    try:
        return orjson.loads(Path(path).read_bytes())
    except orjson.JSONDecodeError as exc:
        raise DatasetError(f"{path}: not JSON ({exc})") from exc


def load_locomo(path: str | Path, namespace: str | None = None) -> list[Conversation]:
    data = read_json(path)
    if not isinstance(data, list):
        raise DatasetError(f"{path}: expected a list of samples")
    if namespace and len(data) > 1:
        raise DatasetError(
            f"{path}: --namespace names one namespace but the file has {len(data)} samples"
        )
    return [_locomo_sample(sample, i, namespace) for i, sample in enumerate(data)]


def _locomo_sample(sample: Any, i: int, namespace: str | None) -> Conversation:
    try:
        conv = sample["conversation"]
        ns = namespace or str(sample["sample_id"])
    except (KeyError, TypeError) as exc:
        raise DatasetError(f"sample {i}: missing {exc}") from exc
    numbers = sorted(int(m.group(1)) for k in conv if (m := _SESSION_RE.match(k)))
    sessions = []
    for n in numbers:
        sid = f"session_{n}"
        date = parse_date(conv.get(f"{sid}_date_time"))
        exchanges = []
        for seq, turn in enumerate(conv[sid]):
            try:
                exchanges.append(
                    Exchange(
                        namespace=ns,
                        session_id=sid,
                        seq=seq,
                        exchange_id=f"{sid}:{seq}",
                        session_date=date,
                        turns=[
                            Turn(
                                role=Role.user,
                                speaker=turn["speaker"],
                                content=turn.get("text", ""),
                                turn_id=turn["dia_id"],
                                image_caption=turn.get("blip_caption"),
                            )
                        ],
                    )
                )
            except (KeyError, ValueError) as exc:
                raise DatasetError(f"sample {ns}, {sid}, turn {seq}: {exc}") from exc
        sessions.append(Session(sid, date, exchanges))
    try:
        qa = [_qa(q) for q in sample.get("qa", [])]
    except (KeyError, TypeError, ValueError) as exc:
        raise DatasetError(f"sample {ns}: a qa entry lacks or mangles {exc}") from exc
    speakers = tuple(s for s in (conv.get("speaker_a"), conv.get("speaker_b")) if s)
    return Conversation(ns, sessions, qa, speakers)


def _qa(q: Any) -> QA:
    """One `qa` entry; TypeError or ValueError naming a typed field of the wrong shape."""
    kind = q.get("beam_type")
    if kind is not None and not isinstance(kind, str):
        raise TypeError(f"beam_type {kind!r}: expected a string")
    sources = q.get("beam_sources") or {}
    if not isinstance(sources, dict) or not all(
        isinstance(ids, list) and all(isinstance(i, str) for i in ids) for ids in sources.values()
    ):
        raise TypeError(f"beam_sources {sources!r}: expected lists of turn ids by name")
    return QA(
        q["question"],
        q.get("answer"),
        list(q.get("evidence") or []),
        int(q["category"]),
        kind,
        {str(name): list(ids) for name, ids in sources.items()},
    )


def load_jsonl(path: str | Path, namespace: str | None = None) -> list[Conversation]:
    by_ns: dict[str, dict[str, list[Exchange]]] = defaultdict(lambda: defaultdict(list))
    unnumbered: dict[tuple[str, str], set[str]] = defaultdict(set)
    with Path(path).open("rb") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise DatasetError(f"{path}:{lineno}: not JSON ({exc})") from exc
            if not isinstance(obj, dict):
                raise DatasetError(f"{path}:{lineno}: expected an object")
            if namespace:
                obj["namespace"] = namespace
            if "namespace" not in obj:
                raise DatasetError(f"{path}:{lineno}: no namespace (give --namespace)")
            ns, sid = str(obj["namespace"]), str(obj.get("session_id", ""))
            session = by_ns[ns][sid]
            if "seq" not in obj:
                obj["seq"] = len(session)
                obj.setdefault("exchange_id", f"{sid}:{len(session)}:{_digest(obj)}")
                unnumbered[(ns, sid)].add(str(obj["exchange_id"]))
            obj.setdefault("exchange_id", f"{sid}:{obj['seq']}")
            try:
                session.append(Exchange.model_validate(obj))
            except ValidationError as exc:
                detail = ContractError.from_validation("Exchange", exc)
                raise DatasetError(f"{path}:{lineno}: {detail}") from exc
    return [
        Conversation(
            ns,
            [
                Session(sid, exs[0].session_date, exs, frozenset(unnumbered[(ns, sid)]))
                for sid, exs in sessions.items()
            ],
        )
        for ns, sessions in by_ns.items()
    ]


def _digest(obj: dict[str, Any]) -> str:
    return hashlib.sha256(orjson.dumps(obj.get("turns"), option=orjson.OPT_SORT_KEYS)).hexdigest()[
        :12
    ]


def load(path: str | Path, fmt: str, namespace: str | None = None) -> list[Conversation]:
    if fmt == "locomo":
        return load_locomo(path, namespace)
    if fmt == "jsonl":
        return load_jsonl(path, namespace)
    raise DatasetError(f"unknown format {fmt!r} (locomo or jsonl)")
