"""A long turn is shown as the passage a request matches, with its span; the turn whole
stays in the store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from schemas import Role
from tests.workers.builders import HASH_DIM, HashEmbedder, turn
from tests.workers.query.test_service import request
from workers.query.multiroute import RecallConfig
from workers.query.passages import request_terms, shown
from workers.query.service import QueryDeps, QueryService
from workers.store import EvidenceStore
from workers.text.passages import passages, to_json
from workers.tokens import count_tokens

REPLY = "\n\n".join(
    [
        "Here is how to set up your telescope mount, step by step. " * 4,
        "## Storage\nKeep the star charts on the SD card: one folder, no cable to run. " * 3,
        "## Firmware\nFlash it with PlatformIO over the serial port on the tripod. " * 3,
    ]
)


def row_of(text: str) -> dict[str, object]:
    return {
        "id": "a/s1/t2",
        "turn_id": "t2",
        "speaker": "Assistant",
        "role": "assistant",
        "text": f"Assistant: {text}",
        "passages": to_json(passages(text, 80, count_tokens)),
    }


def test_shown_is_the_passage_with_most_of_the_request_words() -> None:
    row = row_of(REPLY)
    out = shown(row, request_terms(["How do I flash it with PlatformIO?"]))
    assert out["text"].startswith("Assistant: ") and "PlatformIO" in out["text"]
    start, end = out["span"]
    assert REPLY[start:end] in out["text"] and count_tokens(out["text"]) <= 90
    # no word in common: the opening passage
    first = shown(row, request_terms(["What colour is the sky?"]))
    assert first["text"].startswith("Assistant: Here is how") and first["span"][0] == 0


def test_shown_weighs_a_word_by_how_few_passages_hold_it() -> None:
    reply = "\n\n".join(
        [
            "Your nightly backup runs from cron and writes a dump to the backup disk. " * 3,
            "## Restore test",
            "Once a week, restore the newest dump into a scratch database and check it "
            "with a count query before you trust it: that is the test. " * 2,
            "## Retention",
            "Keep fourteen nightly dumps on the backup disk, then delete the oldest. " * 3,
        ]
    )
    row = row_of(reply)
    # two of the question's words in the opening ("nightly", "backup"), two in the restore
    # section ("restore", "test"), which says them alone: the opening's are in two passages
    out = shown(row, request_terms(["How do I test a restore of the nightly backup?"]))
    assert "Restore test" in out["text"]
    assert out["span_turn_id"] == "t2"


def test_shown_leaves_a_turn_of_one_passage_as_it_is() -> None:
    row = row_of("I use an SD card.")
    assert shown(row, request_terms(["sd card"])) is row


@pytest.mark.asyncio
async def test_a_long_turn_is_served_as_its_passage_with_the_turn_as_provenance(
    tmp_path: Path,
) -> None:
    store = EvidenceStore(str(tmp_path / "db"), HashEmbedder.model_name, HASH_DIM)
    store.turns.passage_tokens = 80
    rows = [
        turn("a", "t1", "Which port should I flash my mount on?", 0),
        turn("a", "t2", REPLY, 0).model_copy(update={"role": Role.assistant, "speaker": None}),
    ]
    vecs = HashEmbedder().embed([r.rendered() for r in rows])
    store.turns.upsert(
        [
            r.model_copy(update={"embedding": v.tolist(), "embedding_model": "hash-16"})
            for r, v in zip(rows, vecs, strict=True)
        ]
    )
    alone = RecallConfig(turn_window=0)  # no window: the turn is its own item
    service = QueryService(QueryDeps(store, HashEmbedder()), alone)
    reply = await service.search(request("a", "flash PlatformIO serial port tripod", k=5))
    (item,) = [e for e in reply.evidence if "t2" in e.turn_ids]
    assert item.kind == "turn" and item.turn_ids == ["t2"]
    assert "PlatformIO" in item.text and count_tokens(item.text) <= 90
    assert item.span is not None and REPLY[item.span[0] : item.span[1]] in item.text
    # the store keeps the whole turn
    (whole,) = store.turns.near("a", [("s1", 2, 2)])
    assert whole["text"] == f"assistant: {REPLY.strip()}"

    assert item.span_turn_id == "t2"
    windowed = QueryService(QueryDeps(store, HashEmbedder()))  # bounded: the question + passage
    reply = await windowed.search(request("a", "flash PlatformIO serial port tripod", k=5))
    assert all(count_tokens(e.text) <= 320 for e in reply.evidence)
    # a window that shows the reply's passage says where it is and in which of its turns
    (window,) = [e for e in reply.evidence if e.kind == "window"]
    assert window.turn_ids == ["t1", "t2"] and window.span_turn_id == "t2"
    assert window.span is not None and REPLY[window.span[0] : window.span[1]] in window.text


def test_a_tie_between_passages_goes_to_the_first_whatever_the_process() -> None:
    """Two passages whose matched words weigh the same show the first in every process: the
    words are summed in the order of a set, which is the process's string hashes."""
    filler = "then we can look at the rest of it together in the next step " * 5
    reply = "\n\n".join(
        f"{words} {filler}"
        for words in ("alpha bravo charlie", "delta echo charlie", "bravo echo charlie")
    )
    script = (
        "import json, sys\n"
        "from workers.query.passages import request_terms, shown\n"
        "print(shown(json.loads(sys.argv[1]), request_terms(['alpha bravo charlie delta echo']))"
        "['span'][0])\n"
    )
    starts = {
        subprocess.run(
            [sys.executable, "-c", script, json.dumps(row_of(reply))],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in range(8)
    }
    assert starts == {"0"}
