"""The second stage's fitting tool and the late-interaction feature it can measure."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.evals.fit_scorer import evaluate, fitted, held_led, main, rows_of
from tests.evals.late_interaction import TokenVectors, columns, maxsim
from workers.query.scorer import load_scorer


def _dump(conversations: int = 3, questions: int = 12) -> list[dict[str, Any]]:
    """Served orders that bury the gold item at rank 12 behind items that share no word with
    the question; its BM25 score and wording give it away."""
    rng = random.Random(7)
    dump = []
    for c in range(conversations):
        for n in range(questions):
            items = []
            for rank in range(20):
                gold = rank == 12
                text = f"Ana adopted a dog named Rex {n}" if gold else f"noise {rng.random():.6f}"
                scores = {"final": 1 - rank / 20, "record_vector": 0.5}
                if gold:
                    scores["record_text"] = 9.0
                items.append(
                    {
                        "kind": "record",
                        "item_id": f"c{c}/{n}/{rank}",
                        "text": text,
                        "turn_ids": [f"D{n}:{rank}"],
                        "session_id": "s",
                        "scores": scores,
                    }
                )
            dump.append(
                {
                    "namespace": f"conv-{c}",
                    "question": "What dog did Ana adopt?",
                    "category": "single-hop",
                    "gold": [f"D{n}:12"],
                    "items": items,
                    "plan": {},
                }
            )
    return dump


def test_weights_fitted_on_the_other_conversations_lead_the_buried_item() -> None:
    dump = _dump()
    rows = [rows_of(q) for q in dump]
    everything, held_back = fitted(dump, rows, 1.0)
    assert set(held_back) == {"conv-0", "conv-1", "conv-2"}
    served = evaluate(dump, rows, dict.fromkeys(held_back))
    assert served["recall_at_k"]["all"]["10"] == 0.0
    led, leads = held_led(dump, rows, held_back)
    assert led["recall_at_k"]["all"]["5"] == 1.0  # every conversation's, from the other two
    assert all(lead.items >= 1 for lead in leads.values())
    x, y, _ = rows_of(dump[0], np.arange(20.0))  # an extra column goes last
    assert x.shape == (20, len(everything.weights) + 1) and x[3, -1] == 3.0 and y[12] == 1.0


def test_maxsim_is_the_mean_of_each_question_tokens_best_match() -> None:
    q = np.asarray([[1.0, 0.0], [0.0, 1.0]])
    assert maxsim(q, np.asarray([[1.0, 0.0], [0.6, 0.8]])) == (1.0 + 0.8) / 2
    assert maxsim(q, q) == 1.0


def test_token_vectors_rank_the_item_that_says_what_is_asked_first() -> None:
    vectors = TokenVectors()
    asked, said, other = vectors(["What dog did Ana adopt?"], content_only=True) + vectors(
        ["Ana adopted a puppy from the shelter.", "The bakery opens at seven."]
    )
    assert len(asked) < len(vectors(["What dog did Ana adopt?"])[0])  # "what", "did" dropped
    assert np.allclose(np.linalg.norm(said, axis=1), 1.0, atol=1e-5)
    assert maxsim(asked, said) > maxsim(asked, other)
    dump = [{"question": "What dog did Ana adopt?", "items": [{"text": "Ana adopted a puppy."}]}]
    assert columns(dump, vectors)[0].shape == (1,)


@pytest.mark.parametrize(
    ("content", "named"),
    [(b"\x89PNG\r\n", "not JSON"), (b'[{"namespace": "c"}]', "reply 0 has no question")],
)
def test_the_command_refuses_a_file_that_is_not_a_dump_by_its_name(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    content: bytes,
    named: str,
) -> None:
    path = tmp_path / "replies.json"
    path.write_bytes(content)
    out = tmp_path / "scorer.json"
    monkeypatch.setattr(sys, "argv", ["fit_scorer", str(path), "--out", str(out)])
    with pytest.raises(SystemExit) as stop:
        main()
    assert stop.value.code == 2
    assert f"{path}: {named}" in capsys.readouterr().err
    assert not out.exists()


def test_the_command_writes_the_weights_the_product_loads_with_what_made_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    dump, out = tmp_path / "dump.json", tmp_path / "scorer.json"
    dump.write_text(json.dumps(_dump()))
    monkeypatch.setattr(sys, "argv", ["fit_scorer", str(dump), "--out", str(out)])
    main()
    assert f"wrote {out}" in capsys.readouterr().out
    body = json.loads(out.read_text())
    assert body["command"] == f"python -m tests.evals.fit_scorer {dump} --out {out}"
    assert str(dump) in body["data"] and "sha256" in body["data"] and body["commit"]
    assert load_scorer(out).weights == tuple(body["weights"])


def test_the_command_writes_nowhere_it_is_not_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps(_dump()))
    monkeypatch.setattr(sys, "argv", ["fit_scorer", str(dump)])
    with pytest.raises(SystemExit) as stop:
        main()
    assert stop.value.code == 2
    assert "--out" in capsys.readouterr().err
