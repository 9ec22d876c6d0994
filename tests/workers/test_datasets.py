"""Conversation files -> exchanges: the LoCoMo layout and the JSON-lines layout."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from schemas import Role
from workers.datasets import (
    Skipped,
    load,
    load_jsonl,
    load_locomo,
    parse_date,
    role_of,
    skipped_lines,
)
from workers.errors import DatasetError
from workers.evaluation.longmemeval import load_longmemeval

DEV_FILE = Path(__file__).resolve().parents[3] / "shared/data/locomo/locomo-dev.json"


def _turn(speaker: str, dia_id: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"speaker": speaker, "dia_id": dia_id, "text": text, **extra}


def _locomo_samples() -> list[dict[str, Any]]:
    """Two small samples in the LoCoMo layout (sessions written out of order on purpose)."""
    a = {
        "sample_id": "sample-a",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_10_date_time": "9:00 am on 1 July, 2023",
            "session_10": [_turn("Ann", "D10:1", "Back again after a while.")],
            "session_1_date_time": "2:14 pm on 8 May, 2023",
            "session_1": [
                _turn("Ann", "D1:1", "Hi Bob, how was the trip?"),
                _turn(
                    "Bob",
                    "D1:2",
                    "Great, look at this.",
                    img_url=["https://example.invalid/x.jpg"],
                    blip_caption="a photo of a red boat on a lake",
                    query="boat lake",
                ),
                _turn("Ann", "D1:3", "Lovely!"),
            ],
            "session_2_date_time": "6:40 pm on 9 June, 2023",
            "session_2": [
                _turn("Bob", "D2:1", "I started painting."),
                _turn("Ann", "D2:2", "What do you paint?"),
            ],
        },
        "qa": [
            {"question": "Q one?", "answer": "A one", "evidence": ["D1:2"], "category": 1},
            {"question": "Q two?", "answer": 2023, "evidence": ["D2:1", "D10:1"], "category": 2},
            {"question": "Q three?", "adversarial_answer": "nope", "evidence": [], "category": 5},
        ],
    }
    b = {
        "sample_id": "sample-b",
        "conversation": {
            "speaker_a": "Cy",
            "speaker_b": "Di",
            "session_1_date_time": "10:04 am on 3 January, 2024",
            "session_1": [_turn("Cy", "D1:1", "Hello."), _turn("Di", "D1:2", "Hey.")],
        },
        "qa": [],
    }
    return [a, b]


def _write(tmp_path: Path, data: Any, name: str = "locomo.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


# -- dates -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2:14 pm on 8 May, 2023", datetime(2023, 5, 8, 14, 14)),
        ("6:40 pm on 9 June, 2023", datetime(2023, 6, 9, 18, 40)),
        ("9:00 am on 1 July, 2023", datetime(2023, 7, 1, 9, 0)),
        ("12:10 am on 2 January, 2024", datetime(2024, 1, 2, 0, 10)),
        ("2023-05-08T14:14:00", datetime(2023, 5, 8, 14, 14)),
        (None, None),
        ("", None),
    ],
)
def test_parse_date(text: str | None, expected: datetime | None) -> None:
    assert parse_date(text) == expected


@pytest.mark.parametrize(
    ("text", "missing"),
    [("TBD 2", "year or month"), ("session 3", "year or month"), ("May 2023", "day")],
)
def test_a_date_that_names_no_day_is_refused_not_filled_in_from_today(
    text: str, missing: str
) -> None:
    with pytest.raises(DatasetError, match=f"unreadable date '{text}': it names no {missing}"):
        parse_date(text)


def test_two_keys_of_one_session_number_refuse_the_file(tmp_path: Path) -> None:
    conv = {
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "I live in Porto."}],
        "session_01_date_time": "2:00 pm on 9 May, 2023",
        "session_01": [{"speaker": "Bob", "dia_id": "D01:1", "text": "Eva is my sister."}],
    }
    path = _write(tmp_path, [{"sample_id": "a", "conversation": conv}])
    with pytest.raises(DatasetError, match="sample a: session_1 and session_01 are both session 1"):
        load_locomo(path)


@pytest.mark.parametrize("key", ["session_-1", "session_x", "sessions"])
def test_turns_under_a_key_that_is_no_session_number_refuse_the_file(
    tmp_path: Path, key: str
) -> None:
    """They were skipped without a word."""
    turns = [{"speaker": "Ann", "dia_id": "D1:1", "text": "I live in Porto."}]
    conv = {"session_1_date_time": "1:56 pm on 8 May, 2023", "session_1": turns, key: turns}
    path = _write(tmp_path, [{"sample_id": "a", "conversation": conv}])
    with pytest.raises(DatasetError, match=f"sample a: {key} holds turns but is no session_N"):
        load_locomo(path)


# -- LoCoMo ----------------------------------------------------------------------------


def test_load_locomo_layout(tmp_path: Path) -> None:
    convs = load_locomo(_write(tmp_path, _locomo_samples()))
    assert [c.namespace for c in convs] == ["sample-a", "sample-b"]
    a, b = convs

    # sessions in numeric order: session_10 after session_2
    assert [s.session_id for s in a.sessions] == ["session_1", "session_2", "session_10"]
    assert [s.date for s in a.sessions] == [
        datetime(2023, 5, 8, 14, 14),
        datetime(2023, 6, 9, 18, 40),
        datetime(2023, 7, 1, 9, 0),
    ]
    assert a.speakers == ("Ann", "Bob")
    assert a.turn_count == 6

    s1 = a.sessions[0]
    assert [e.seq for e in s1.exchanges] == [0, 1, 2]
    assert [e.exchange_id for e in s1.exchanges] == [
        "session_1:0",
        "session_1:1",
        "session_1:2",
    ]
    for e in s1.exchanges:
        assert e.namespace == "sample-a" and e.session_id == "session_1"
        assert e.session_date == datetime(2023, 5, 8, 14, 14)
        assert len(e.turns) == 1 and e.turns[0].role is Role.user
    assert [e.turns[0].turn_id for e in s1.exchanges] == ["D1:1", "D1:2", "D1:3"]
    assert [e.turn_ids() for e in s1.exchanges] == [["D1:1"], ["D1:2"], ["D1:3"]]
    assert [e.turns[0].speaker for e in s1.exchanges] == ["Ann", "Bob", "Ann"]
    assert s1.exchanges[0].turns[0].content == "Hi Bob, how was the trip?"

    # the image caption is kept, and shows in the rendered text
    pic = s1.exchanges[1].turns[0]
    assert pic.image_caption == "a photo of a red boat on a lake"
    assert pic.content == "Great, look at this."
    assert "[image: a photo of a red boat on a lake]" in pic.rendered()
    assert s1.exchanges[0].turns[0].image_caption is None

    # seq restarts at 0 in every session
    assert [e.seq for e in a.sessions[1].exchanges] == [0, 1]
    assert [e.seq for e in a.sessions[2].exchanges] == [0]
    assert a.sessions[2].exchanges[0].turns[0].turn_id == "D10:1"
    assert [e.exchange_id for e in a.exchanges][-1] == "session_10:0"

    # qa
    assert [q.question for q in a.qa] == ["Q one?", "Q two?", "Q three?"]
    assert [q.evidence for q in a.qa] == [["D1:2"], ["D2:1", "D10:1"], []]
    assert [q.category for q in a.qa] == [1, 2, 5]
    assert a.qa[0].answer == "A one" and a.qa[1].answer == 2023
    assert a.qa[2].answer is None  # adversarial questions carry no `answer`

    assert b.namespace == "sample-b"
    assert [s.session_id for s in b.sessions] == ["session_1"]
    assert b.sessions[0].date == datetime(2024, 1, 3, 10, 4)
    assert all(e.namespace == "sample-b" for e in b.exchanges)
    assert b.qa == []


def test_load_locomo_namespace_override_single_sample(tmp_path: Path) -> None:
    [conv] = load_locomo(_write(tmp_path, _locomo_samples()[:1]), namespace="mine")
    assert conv.namespace == "mine"
    assert {e.namespace for e in conv.exchanges} == {"mine"}


def test_load_locomo_namespace_override_with_several_samples_fails(tmp_path: Path) -> None:
    path = _write(tmp_path, _locomo_samples())
    with pytest.raises(DatasetError, match="2 samples"):
        load_locomo(path, namespace="mine")
    with pytest.raises(DatasetError):
        load(path, "locomo", namespace="mine")


def test_load_locomo_rejects_wrong_layouts(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="list"):
        load_locomo(_write(tmp_path, {"sample_id": "x"}))
    with pytest.raises(DatasetError, match="sample 0"):
        load_locomo(_write(tmp_path, [{"conversation": {}}]))  # no sample_id
    bad = _locomo_samples()
    del bad[0]["conversation"]["session_2"][1]["dia_id"]
    with pytest.raises(DatasetError, match=r"sample-a, session_2, turn 1"):
        load_locomo(_write(tmp_path, bad))


@pytest.mark.parametrize(
    ("mangle", "said"),
    [
        (lambda d: d.__setitem__(0, "a"), r"sample 0: expected an object, got 'a'"),
        (lambda d: d[0].__setitem__("conversation", [1]), r"sample-a: conversation: expected an"),
        (lambda d: d[0]["conversation"].__setitem__("session_1", 5), r"session_1: expected a list"),
        (lambda d: d[0]["conversation"]["session_1"].__setitem__(0, "hi"), r"turn 0: expected an"),
        (lambda d: d[0]["conversation"].__setitem__("session_1_date_time", 12), r"date as text"),
        (lambda d: d[0].__setitem__("qa", "nope"), r"sample-a: qa: expected a list"),
        (lambda d: d[0].__setitem__("qa", [7]), r"sample-a: qa entry 0: expected an object"),
        (lambda d: d[1].__setitem__("sample_id", "sample-a"), r"samples 0 and 1 are both"),
    ],
)
def test_load_locomo_a_mis_shaped_file_is_one_error_naming_the_place(
    tmp_path: Path, mangle: Any, said: str
) -> None:
    data = _locomo_samples()
    mangle(data)
    with pytest.raises(DatasetError, match=said):
        load_locomo(_write(tmp_path, data))


def test_load_locomo_a_turn_the_contract_refuses_is_skipped_alone_and_named(
    tmp_path: Path,
) -> None:
    samples = _locomo_samples()
    turns = samples[0]["conversation"]["session_1"]
    turns[1]["text"] = "x" + " " * 348_000 + "y"  # a runaway generation, mostly blanks
    del turns[1]["blip_caption"]
    turns.append(_turn("Bob", "D1:4", "   "))  # nothing to say
    turns.append(_turn("Ann", "D1:5", "And then?"))
    path = _write(tmp_path, samples)

    skipped: list[Skipped] = []
    a, b = load_locomo(path, skipped=skipped)
    s1 = a.sessions[0]
    # the rest of the session keeps its turn ids and seqs: a gap, still strictly increasing
    assert [e.turns[0].turn_id for e in s1.exchanges] == ["D1:1", "D1:3", "D1:5"]
    assert [e.seq for e in s1.exchanges] == [0, 2, 4]
    assert [e.exchange_id for e in s1.exchanges] == ["session_1:0", "session_1:2", "session_1:4"]
    assert a.turn_count == 6 and b.turn_count == 2  # the rest of the file is loaded
    assert skipped == [
        Skipped(
            str(path),
            "content: 348,002 characters, at most 200,000",
            "sample-a",
            "session_1",
            "D1:2",
        ),
        Skipped(
            str(path),
            "a turn needs content or an image caption with a visible character",
            "sample-a",
            "session_1",
            "D1:4",
        ),
    ]
    assert str(skipped[0]) == (
        f"{path}: namespace sample-a, session session_1, turn D1:2: "
        "content: 348,002 characters, at most 200,000"
    )
    lines = skipped_lines(skipped)
    assert lines[:2] == [f"skipped {s}" for s in skipped]
    assert lines[2].startswith("2 messages skipped") and len(lines) == 3
    assert skipped_lines([]) == []
    assert skipped_lines(skipped, rest=False)[2].endswith("the contract refuses them")
    assert skipped[0].as_dict()["turn_id"] == "D1:2"

    # without a list to report them in, the file is refused with the same words
    with pytest.raises(DatasetError, match=r"turn D1:2: content: 348,002 characters"):
        load_locomo(path)
    with pytest.raises(DatasetError, match=r"turn D1:2"):
        load(path, "locomo")
    more: list[Skipped] = []
    assert len(load(path, "locomo", skipped=more)) == 2 and more == skipped


def test_load_locomo_layout_errors_name_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path, [{"sample_id": "x"}])
    with pytest.raises(DatasetError, match=rf"{re.escape(str(path))}: sample 0: missing 'conv"):
        load_locomo(path, skipped=[])
    samples = _locomo_samples()
    samples[0]["conversation"]["session_2_date_time"] = "99:99 on 45 Smarch"
    with pytest.raises(DatasetError, match=r"locomo\.json: sample sample-a, session_2: unread"):
        load_locomo(_write(tmp_path, samples), skipped=[])


def test_load_dispatch_and_unknown_format(tmp_path: Path) -> None:
    path = _write(tmp_path, _locomo_samples())
    assert [c.namespace for c in load(path, "locomo")] == ["sample-a", "sample-b"]
    with pytest.raises(DatasetError, match="unknown format"):
        load(path, "csv")


# -- JSON lines ------------------------------------------------------------------------


def _line(**obj: Any) -> str:
    return json.dumps(obj)


def _jsonl(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "ex.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _turns(text: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": text},
        {"role": "assistant", "content": "ok: " + text},
    ]


def test_load_jsonl_the_same_words_on_another_day_are_another_exchange(tmp_path: Path) -> None:
    """Two files of one session, each opening with the same greeting: the second day's is a
    new exchange (it was taken for a re-send and dropped); the same file again is not."""

    def first_id(name: str, day: str) -> str:
        (tmp_path / name).mkdir()
        line = _line(session_id="s", turns=_turns("Good morning!"), session_date=day)
        [conv] = load_jsonl(_jsonl(tmp_path / name, [line]), namespace="ns")
        return conv.sessions[0].exchanges[0].exchange_id

    monday = first_id("a", "2025-03-03T09:00:00")
    assert first_id("b", "2025-03-04T09:00:00") != monday
    assert first_id("c", "2025-03-03T09:00:00") == monday


def test_load_jsonl_fills_seq_and_exchange_id(tmp_path: Path) -> None:
    path = _jsonl(
        tmp_path,
        [
            _line(session_id="s1", turns=_turns("one"), session_date="2024-02-01T10:00:00"),
            _line(session_id="s2", turns=_turns("other")),
            "",  # blank lines are skipped
            _line(session_id="s1", turns=_turns("two")),
            _line(session_id="s1", turns=_turns("three"), exchange_id="custom"),
        ],
    )
    [conv] = load_jsonl(path, namespace="ns")
    assert conv.namespace == "ns"
    assert [s.session_id for s in conv.sessions] == ["s1", "s2"]
    s1, s2 = conv.sessions
    assert [e.seq for e in s1.exchanges] == [0, 1, 2]
    ids = [e.exchange_id for e in s1.exchanges]
    assert ids[0].startswith("s1:0:") and ids[1].startswith("s1:1:") and ids[2] == "custom"
    assert s1.unnumbered == frozenset(ids)  # no seq in the file: the producer numbers them
    assert [e.turns[0].content for e in s1.exchanges] == ["one", "two", "three"]
    assert [e.seq for e in s2.exchanges] == [0]
    assert s2.exchanges[0].exchange_id.startswith("s2:0:")
    assert s1.date == datetime(2024, 2, 1, 10, 0)
    assert s2.date is None
    assert all(e.namespace == "ns" for e in conv.exchanges)
    assert [t.role for t in s1.exchanges[0].turns] == [Role.user, Role.assistant]


def test_load_jsonl_keeps_explicit_seq_and_namespace_per_line(tmp_path: Path) -> None:
    path = _jsonl(
        tmp_path,
        [
            _line(namespace="u1", session_id="s", seq=5, turns=_turns("a")),
            _line(namespace="u2", session_id="s", turns=_turns("b")),
            _line(namespace="u1", session_id="s", seq=9, turns=_turns("c")),
        ],
    )
    convs = load_jsonl(path)
    assert [c.namespace for c in convs] == ["u1", "u2"]
    assert [(e.seq, e.exchange_id) for e in convs[0].exchanges] == [(5, "s:5"), (9, "s:9")]
    assert [e.seq for e in convs[1].exchanges] == [0]
    assert not convs[0].sessions[0].unnumbered and convs[1].sessions[0].unnumbered


def test_load_jsonl_namespace_argument_overrides_lines(tmp_path: Path) -> None:
    path = _jsonl(tmp_path, [_line(namespace="theirs", session_id="s", turns=_turns("a"))])
    [conv] = load_jsonl(path, namespace="mine")
    assert conv.namespace == "mine"
    assert [e.namespace for e in conv.exchanges] == ["mine"]


def test_load_jsonl_requires_a_namespace(tmp_path: Path) -> None:
    path = _jsonl(
        tmp_path,
        [
            _line(namespace="u1", session_id="s", turns=_turns("a")),
            _line(session_id="s", turns=_turns("b")),
        ],
    )
    with pytest.raises(DatasetError, match=r":2: no namespace"):
        load_jsonl(path)
    # given by the caller, every line is fine
    [conv] = load_jsonl(path, namespace="ns")
    assert len(list(conv.exchanges)) == 2


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"session_id": "s", "turns": [{"role": "robot", "content": "x"}]}, "turns.0.role"),
        ({"session_id": "s", "turns": []}, "turns"),
        ({"turns": [{"role": "user", "content": "x"}]}, "session_id"),
        (
            {"session_id": "bad id with spaces", "turns": [{"role": "user", "content": "x"}]},
            "session_id",
        ),
        ({"session_id": "s", "turns": [{"role": "user", "content": "x"}], "colour": 1}, "colour"),
        ({"session_id": "s", "seq": -1, "turns": [{"role": "user", "content": "x"}]}, "seq"),
    ],
)
def test_load_jsonl_invalid_line_names_line_and_field(
    tmp_path: Path, bad: dict[str, Any], field: str
) -> None:
    path = _jsonl(
        tmp_path,
        [
            _line(session_id="s", turns=_turns("fine")),
            "",
            json.dumps(bad),  # line 3
        ],
    )
    with pytest.raises(DatasetError) as info:
        load_jsonl(path, namespace="ns")
    msg = str(info.value)
    assert f"{path}:3:" in msg
    assert field in msg


def test_load_jsonl_a_line_the_contract_refuses_is_skipped_alone(tmp_path: Path) -> None:
    long = {"role": "assistant", "content": "z" * 200_001}
    path = _jsonl(
        tmp_path,
        [
            _line(session_id="s", turns=_turns("one")),
            _line(session_id="s", turns=[{"role": "user", "content": "two"}, long]),
            _line(session_id="s", turns=_turns("three")),
            _line(session_id="t", seq=3, turns=[long]),
            _line(session_id="t", seq=4, turns=_turns("four")),
            _line(session_id="lone", turns=[long]),
        ],
    )
    skipped: list[Skipped] = []
    [conv] = load_jsonl(path, namespace="ns", skipped=skipped)
    s, t = conv.sessions  # a session whose every line is refused is not there at all
    assert [e.turns[0].content for e in s.exchanges] == ["one", "three"]
    # numbered by place in the file: the skipped line leaves a gap, the ids do not shift
    assert [e.seq for e in s.exchanges] == [0, 2]
    assert s.exchanges[1].exchange_id.startswith("s:2:")
    assert s.unnumbered == frozenset(e.exchange_id for e in s.exchanges)
    assert [(e.seq, e.exchange_id) for e in t.exchanges] == [(4, "t:4")]
    reason = "turns.1.content: 200,001 characters, at most 200,000"
    assert skipped == [
        Skipped(str(path), reason, "ns", "s", line=2),
        Skipped(str(path), reason.replace("turns.1", "turns.0"), "ns", "t", line=4),
        Skipped(str(path), reason.replace("turns.1", "turns.0"), "ns", "lone", line=6),
    ]
    assert str(skipped[0]) == f"{path}:2: namespace ns, session s: {reason}"
    with pytest.raises(DatasetError, match=rf"{re.escape(str(path))}:2: .*{reason}"):
        load_jsonl(path, namespace="ns")
    # the layout is still the file's: a line that is not JSON refuses the file
    bad = _jsonl(tmp_path, [_line(session_id="s", turns=_turns("a")), "{not json"])
    with pytest.raises(DatasetError, match=r":2: not JSON"):
        load_jsonl(bad, namespace="ns", skipped=[])


def test_load_jsonl_not_json_or_not_an_object(tmp_path: Path) -> None:
    path = _jsonl(tmp_path, [_line(session_id="s", turns=_turns("a")), "{not json"])
    with pytest.raises(DatasetError, match=r":2: not JSON"):
        load_jsonl(path, namespace="ns")
    path = _jsonl(tmp_path, ["[1, 2]"])
    with pytest.raises(DatasetError, match=r":1: expected an object"):
        load_jsonl(path, namespace="ns")


# -- the LoCoMo dev split (when present) -------------------------------------------------


def test_dev_file_path_points_at_shared_data() -> None:
    # tests/workers/test_datasets.py -> parents[3] is the directory holding the repo
    repo = Path(__file__).resolve().parents[2]
    assert (repo / "pyproject.toml").is_file()
    assert repo.parent / "shared" / "data" / "locomo" / "locomo-dev.json" == DEV_FILE


def test_locomo_dev_split_loads() -> None:
    if not DEV_FILE.is_file():
        pytest.skip(f"{DEV_FILE} not present")
    raw = json.loads(DEV_FILE.read_text(encoding="utf-8"))
    convs = load_locomo(DEV_FILE)
    assert len(convs) == 5
    assert [c.namespace for c in convs] == [str(s["sample_id"]) for s in raw]
    assert len({c.namespace for c in convs}) == 5
    for conv, sample in zip(convs, raw, strict=True):
        numbers = [int(s.session_id.split("_")[1]) for s in conv.sessions]
        assert numbers == sorted(numbers) and len(numbers) > 1
        assert all(s.date is not None for s in conv.sessions)
        turn_ids = [t.turn_id for e in conv.exchanges for t in e.turns]
        assert all(turn_ids) and len(turn_ids) == len(set(turn_ids))
        raw_turns = sum(
            len(v) for k, v in sample["conversation"].items() if k.split("_")[-1].isdigit()
        )
        assert conv.turn_count == raw_turns
        for s in conv.sessions:
            assert [e.seq for e in s.exchanges] == list(range(len(s.exchanges)))
        known = set(turn_ids)
        with_evidence = [q for q in conv.qa if q.evidence]
        assert with_evidence
        resolved = sum(all(ev in known for ev in q.evidence) for q in with_evidence)
        # a handful of LoCoMo evidence ids are malformed; nearly all resolve
        assert resolved / len(with_evidence) >= 0.95, (conv.namespace, resolved, len(with_evidence))


def test_load_locomo_bad_qa_entry_is_a_dataset_error(tmp_path: Path) -> None:
    bad = _locomo_samples()
    del bad[0]["qa"][1]["category"]
    with pytest.raises(DatasetError, match="sample-a"):
        load_locomo(_write(tmp_path, bad))


def test_typed_questions_keep_their_type_and_named_sources(tmp_path: Path) -> None:
    samples = _locomo_samples()
    qa = samples[0]["qa"]
    qa[0]["beam_type"] = "update"
    qa[0]["beam_sources"] = {"original_info": ["D1:1"], "updated_info": ["D1:2", "D2:1"]}
    qa[1]["beam_type"] = "order"
    a, b = load_locomo(_write(tmp_path, samples))
    assert [(q.kind, q.sources) for q in a.qa] == [
        ("update", {"original_info": ["D1:1"], "updated_info": ["D1:2", "D2:1"]}),
        ("order", {}),
        (None, {}),  # a file without the fields: no type, no sources
    ]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("beam_type", 3),
        ("beam_sources", ["D1:1"]),
        ("beam_sources", {"original_info": "D1:1"}),
        ("beam_sources", {"original_info": [1]}),
    ],
)
def test_a_mistyped_type_or_sources_field_is_a_dataset_error_naming_it(
    tmp_path: Path, field: str, value: Any
) -> None:
    samples = _locomo_samples()
    samples[0]["qa"][0][field] = value
    with pytest.raises(DatasetError, match=f"sample-a: .*{field}"):
        load_locomo(_write(tmp_path, samples))


@pytest.mark.parametrize("content", [b'[{"sample_id": ', b"\xff\xfe\x00garbage"])
def test_a_file_that_is_not_json_is_a_dataset_error_naming_it(
    tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "locomo.json"
    path.write_bytes(content)
    with pytest.raises(DatasetError, match=r"locomo\.json: not JSON"):
        load_locomo(path)
    with pytest.raises(DatasetError, match=r"locomo\.json: not JSON"):
        load_longmemeval(path)


def test_locomo_layout_speaker_named_for_a_role_has_that_role() -> None:
    assert [role_of(s) for s in ("User", "assistant", " Assistant ", "Mirela", "System")] == [
        Role.user,
        Role.assistant,
        Role.assistant,
        Role.user,
        Role.system,
    ]


def test_a_file_of_another_layout_is_named_as_such(tmp_path: Path) -> None:
    turns = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    with pytest.raises(DatasetError, match="not the LoCoMo layout .* first entry is"):
        load_locomo(_write(tmp_path, turns), namespace="errs")
    lines = tmp_path / "lines.json"
    lines.write_text('{"a": 1}\n{"b": 2}\n')
    with pytest.raises(DatasetError, match="not JSON .*one JSON value a line is --format jsonl"):
        load_locomo(lines)


def test_a_byte_order_mark_at_the_start_of_a_file_is_read_past(tmp_path: Path) -> None:
    lines = _jsonl(tmp_path, [_line(session_id="s1", turns=_turns("one"))])
    lines.write_bytes(b"\xef\xbb\xbf" + lines.read_bytes())
    [conv] = load_jsonl(lines, namespace="ns")
    assert [e.turns[0].content for e in conv.exchanges] == ["one"]
    sample = _write(tmp_path, _locomo_samples())
    sample.write_bytes(b"\xef\xbb\xbf" + sample.read_bytes())
    assert [c.namespace for c in load_locomo(sample)] == ["sample-a", "sample-b"]
