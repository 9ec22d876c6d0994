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

A message the contract refuses (a turn over its length limit, an empty one, a bad field) is
left out alone, as a `Skipped` entry naming where it is and why, when the caller passes a
`skipped` list to collect them; without one it raises `DatasetError`, so that no caller
drops a message without saying so. The rest of the file loads either way. A skipped message
keeps its place in the numbering: the turns after it keep their seq (a gap is fine, the
segmenter wants seqs increasing) and their ids. A file whose layout is wrong (not JSON, not a
list, a sample without `conversation`, a turn without `dia_id`) raises `DatasetError`.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
from dateutil import parser as dateparser
from pydantic import ValidationError

from schemas import Exchange, Role, Turn
from schemas.base import shown
from schemas.errors import validation_reason
from workers.errors import DatasetError

_SESSION_RE = re.compile(r"^session_(\d+)$")
_DEFAULTS = (datetime(2001, 1, 1), datetime(2002, 2, 2))  # no part of a date is both
_BOM = b"\xef\xbb\xbf"  # the byte-order mark some editors write, as the gateway takes it


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


@dataclass(frozen=True)
class Skipped:
    """A message of a conversation file that the contract refuses, left out alone.

    `file` and `line` (JSON lines) or `namespace`, `session_id` and `turn_id` say where it
    is; `reason` is the contract's, field by field (`content: 348,000 characters, at most
    200,000`)."""

    file: str
    reason: str
    namespace: str | None = None
    session_id: str | None = None
    turn_id: str | None = None
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        named = [
            f"{label} {value}"
            for label, value in (
                ("namespace", self.namespace),
                ("session", self.session_id),
                ("turn", self.turn_id),
            )
            if value is not None
        ]
        return ": ".join([where, *([", ".join(named)] if named else []), self.reason])

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def skipped_lines(skipped: Sequence[Skipped], rest: bool = True) -> list[str]:
    """What a command prints about the messages it left out: one line each, then the count
    (`rest`: whether anything else of the file was loaded)."""
    if not skipped:
        return []
    noun = "message" if len(skipped) == 1 else "messages"
    after = " (the rest was loaded)" if rest else ""
    return [
        *(f"skipped {s}" for s in skipped),
        f"{len(skipped)} {noun} skipped: the contract refuses them{after}",
    ]


def refusal(exc: ValidationError) -> str:
    """The contract's reasons, field by field; a text over its limit says how long it is."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        text = err.get("input")
        if err["type"] == "string_too_long" and isinstance(text, str):
            msg = f"{len(text):,} characters, at most {err['ctx']['max_length']:,}"
        else:
            msg = validation_reason(err)
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)


def skip(skipped: list[Skipped] | None, entry: Skipped) -> None:
    """Collect `entry` where the caller asked for it; else refuse the file with its words."""
    if skipped is None:
        raise DatasetError(str(entry))
    skipped.append(entry)


def role_of(speaker: Any) -> Role:
    """The LoCoMo layout has speakers and no roles: a speaker called by a role's name
    ("User", "assistant") has that role; anyone else speaks as a user (two people chatting)."""
    name = str(speaker).strip().lower()
    return Role(name) if name in {r.value for r in Role} else Role.user


def parse_date(text: str | None) -> datetime | None:
    """LoCoMo writes `2:14 pm on 8 May, 2023`; dateutil reads it (and ISO) fuzzily."""
    if not text:
        return None
    if not isinstance(text, str):
        raise DatasetError(f"expected a date as text, got {shown(text, 40)}")
    try:  # read twice with two defaults: a part they fill differently is not in the text
        parsed: datetime = dateparser.parse(text, fuzzy=True, default=_DEFAULTS[0])
        other: datetime = dateparser.parse(text, fuzzy=True, default=_DEFAULTS[1])
    except (ValueError, OverflowError) as exc:
        raise DatasetError(f"unreadable date {text!r}") from exc
    missing = [
        part for part in ("year", "month", "day") if getattr(parsed, part) != getattr(other, part)
    ]
    if missing:  # "TBD 2" would read as the 2nd of this month
        raise DatasetError(f"unreadable date {text!r}: it names no {' or '.join(missing)}")
    return parsed


def read_json(path: str | Path) -> Any:
    """A JSON file's value; DatasetError naming the file when it is not JSON (or not UTF-8)."""
    try:
        return orjson.loads(Path(path).read_bytes().removeprefix(_BOM))
    except orjson.JSONDecodeError as exc:
        many = "content after document" in str(exc)  # one value a line: JSON Lines
        hint = "; one JSON value a line is --format jsonl" if many else ""
        raise DatasetError(f"{path}: not JSON ({exc}){hint}") from exc


def load_locomo(
    path: str | Path, namespace: str | None = None, skipped: list[Skipped] | None = None
) -> list[Conversation]:
    """The samples of a LoCoMo-layout file; turns the contract refuses go to `skipped`."""
    data = read_json(path)
    if not isinstance(data, list):
        raise DatasetError(f"{path}: expected a list of samples")
    if data and isinstance(data[0], dict) and not {"conversation", "sample_id"} & data[0].keys():
        raise DatasetError(
            f"{path}: not the LoCoMo layout (a list of samples, each an object with "
            f"'sample_id' and 'conversation'); its first entry is {shown(data[0], 60)}"
        )
    if namespace and len(data) > 1:
        raise DatasetError(
            f"{path}: --namespace names one namespace but the file has {len(data)} samples"
        )
    samples = [_locomo_sample(str(path), s, i, namespace, skipped) for i, s in enumerate(data)]
    first: dict[str, int] = {}
    for i, conv in enumerate(samples):  # the same sessions twice: the second fenced as replays
        if (j := first.setdefault(conv.namespace, i)) != i:
            raise DatasetError(f"{path}: samples {j} and {i} are both {conv.namespace!r}")
    return samples


def _locomo_sample(
    path: str, sample: Any, i: int, namespace: str | None, skipped: list[Skipped] | None
) -> Conversation:
    sample = _shaped(sample, dict, f"{path}: sample {i}")
    for key in ("conversation", "sample_id"):
        if key not in sample:
            raise DatasetError(f"{path}: sample {i}: missing {key!r}")
    ns = namespace or str(sample["sample_id"])
    conv = _shaped(sample["conversation"], dict, f"{path}: sample {ns}: conversation")
    keys: dict[int, str] = {}
    for key in conv:
        if not _SESSION_RE.match(key) and isinstance(conv[key], list) and key.startswith("session"):
            raise DatasetError(
                f"{path}: sample {ns}: {key} holds turns but is no session_N (N a whole number)"
            )
        if (m := _SESSION_RE.match(key)) and (seen := keys.setdefault(int(m.group(1)), key)) != key:
            raise DatasetError(
                f"{path}: sample {ns}: {seen} and {key} are both session {int(m.group(1))}"
            )
    sessions = []
    for n in sorted(keys):
        sid = keys[n]
        where = f"{path}: sample {ns}, {sid}"
        try:
            date = parse_date(conv.get(f"{sid}_date_time"))
        except DatasetError as exc:
            raise DatasetError(f"{where}: {exc}") from exc
        exchanges = [
            ex
            for seq, turn in enumerate(_shaped(conv[sid], list, where))
            if (ex := _locomo_turn(path, ns, sid, date, seq, turn, skipped)) is not None
        ]
        sessions.append(Session(sid, date, exchanges))
    entries = _shaped(sample.get("qa", []), list, f"{path}: sample {ns}: qa")
    try:
        qa = [_qa(_shaped(q, dict, f"qa entry {j}")) for j, q in enumerate(entries)]
    except DatasetError as exc:
        raise DatasetError(f"{path}: sample {ns}: {exc}") from exc
    except (KeyError, TypeError, ValueError) as exc:
        raise DatasetError(f"{path}: sample {ns}: a qa entry lacks or mangles {exc}") from exc
    speakers = tuple(s for s in (conv.get("speaker_a"), conv.get("speaker_b")) if s)
    return Conversation(ns, sessions, qa, speakers)


def _shaped(value: Any, kind: type, where: str) -> Any:
    """`value` when it is of the layout's `kind` (an object or a list); else DatasetError."""
    if not isinstance(value, kind):
        expected = "an object" if kind is dict else "a list"
        raise DatasetError(f"{where}: expected {expected}, got {shown(value, 40)}")
    return value


def _locomo_turn(
    path: str,
    ns: str,
    sid: str,
    date: datetime | None,
    seq: int,
    turn: Any,
    skipped: list[Skipped] | None,
) -> Exchange | None:
    """One LoCoMo turn as its exchange; None when the contract refuses it (then in `skipped`).

    Its seq is its place in the session, whatever was skipped before it."""
    where = f"{path}: sample {ns}, {sid}, turn {seq}"
    turn = _shaped(turn, dict, where)
    try:
        speaker, dia_id = turn["speaker"], turn["dia_id"]
    except KeyError as exc:
        raise DatasetError(f"{where}: missing {exc}") from exc
    try:
        return Exchange(
            namespace=ns,
            session_id=sid,
            seq=seq,
            exchange_id=f"{sid}:{seq}",
            session_date=date,
            turns=[
                Turn(
                    role=role_of(speaker),
                    speaker=speaker,
                    content=turn.get("text", ""),
                    turn_id=dia_id,
                    image_caption=turn.get("blip_caption"),
                )
            ],
        )
    except ValidationError as exc:
        tid = dia_id if isinstance(dia_id, str) and dia_id else f"#{seq}"
        skip(skipped, Skipped(path, refusal(exc), ns, sid, tid))
        return None


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


def load_jsonl(
    path: str | Path, namespace: str | None = None, skipped: list[Skipped] | None = None
) -> list[Conversation]:
    """The exchanges of a JSON-lines file by namespace and session; lines the contract
    refuses go to `skipped`."""
    by_ns: dict[str, dict[str, list[Exchange]]] = defaultdict(lambda: defaultdict(list))
    unnumbered: dict[tuple[str, str], set[str]] = defaultdict(set)
    places: dict[tuple[str, str], int] = defaultdict(int)  # lines seen per session, skipped too
    with Path(path).open("rb") as fh:
        for lineno, line in enumerate(fh, 1):
            if lineno == 1:
                line = line.removeprefix(_BOM)
            if not line.strip():
                continue
            obj = _jsonl_object(path, lineno, line, namespace)
            ns, sid = str(obj["namespace"]), str(obj.get("session_id", ""))
            place = places[(ns, sid)]
            places[(ns, sid)] += 1
            numbered = "seq" in obj
            if not numbered:
                obj["seq"] = place
                obj.setdefault("exchange_id", f"{sid}:{place}:{_digest(obj)}")
            obj.setdefault("exchange_id", f"{sid}:{obj['seq']}")
            try:
                ex = Exchange.model_validate(obj)
            except ValidationError as exc:
                skip(skipped, Skipped(str(path), refusal(exc), ns, sid or None, line=lineno))
                continue
            by_ns[ns][sid].append(ex)
            if not numbered:
                unnumbered[(ns, sid)].add(ex.exchange_id)
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


def _jsonl_object(path: str | Path, lineno: int, line: bytes, namespace: str | None) -> Any:
    """One line's object, with its namespace; DatasetError where the layout is wrong."""
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
    return obj


def _digest(obj: dict[str, Any]) -> str:
    """What tells a line's exchange from another at its place in the session: its turns and
    its date (the same greeting on the next day is a new exchange, the same line of the
    same file sent again is not)."""
    said = {"turns": obj.get("turns"), "session_date": obj.get("session_date")}
    return hashlib.sha256(orjson.dumps(said, option=orjson.OPT_SORT_KEYS)).hexdigest()[:12]


def load(
    path: str | Path,
    fmt: str,
    namespace: str | None = None,
    skipped: list[Skipped] | None = None,
) -> list[Conversation]:
    if fmt == "locomo":
        return load_locomo(path, namespace, skipped)
    if fmt == "jsonl":
        return load_jsonl(path, namespace, skipped)
    raise DatasetError(f"unknown format {fmt!r} (locomo or jsonl)")
