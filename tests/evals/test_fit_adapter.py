"""The query adapter's fit: a question nearer the wrong turn ends nearer the turn that answers it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from streams.factories import adapter_of, make_embedder
from streams.settings import Settings
from tests.evals.fit_adapter import Split, fit, main, ranked
from tests.streams.bench.files import write_locomo
from workers.evaluation.metrics import recall_at_k
from workers.query.adapter import QueryAdapter


def split(name: str, seed: int) -> Split:
    """Questions that lie along the axis of a decoy turn, with their answer one axis over:
    a question's vector says "question", the map must learn to move it to the statement."""
    rng = np.random.default_rng(seed)
    turns = np.eye(8, dtype=np.float32)  # axes 0-3 answers, 4-7 their decoys
    q = turns[4:] * 0.8 + turns[:4] * 0.55 + rng.normal(0, 0.02, (4, 8)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    ids = [f"{name}{i}" for i in range(8)]
    return Split(name, ids, turns, q, [[0], [1], [2], [3]], ["single-hop"] * 4)


def top1(s: Split, adapter: QueryAdapter | None) -> list[float]:
    """Each question's recall at the first turn."""
    return [recall_at_k(r.items, r.gold, 1) for r in ranked(s, adapter)]


def test_the_fitted_map_moves_unseen_questions_to_their_answers() -> None:
    train, held = [split("a", 0), split("b", 1)], split("c", 2)
    assert top1(held, None) == [0.0] * 4  # the decoy is nearest every question
    adapter = QueryAdapter("toy", fit(train, ridge=0.001, steps=300))
    assert top1(held, adapter) == [1.0] * 4
    # the ridge keeps the map near the identity: a heavy one barely moves anything
    assert top1(held, QueryAdapter("toy", fit(train, ridge=100.0, steps=300))) == [0.0] * 4


def test_the_command_writes_an_adapter_the_product_loads_with_what_made_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data, out = tmp_path / "locomo.json", tmp_path / "adapter.npz"
    write_locomo(data)  # one conversation; fitting holds one back, so a second, renamed
    (tiny,) = json.loads(data.read_text())
    data.write_text(json.dumps([tiny, {**tiny, "sample_id": "tiny-2"}]))
    argv = ["fit_adapter", "--data", str(data), "--out", str(out), "--steps", "10"]
    monkeypatch.setattr(sys, "argv", argv)
    main()
    assert f"wrote {out} (all-MiniLM-L6-v2" in capsys.readouterr().out
    with np.load(out) as f:
        assert str(f["command"]) == f"python -m tests.evals.fit_adapter {' '.join(argv[1:])}"
        assert str(data) in str(f["data"]) and str(f["commit"]) and str(f["written_at"])
    settings = Settings.load(None, query={"adapter": str(out)})
    embedder = make_embedder(settings)
    adapter = adapter_of(settings, embedder)  # fitted for the bundled MiniLM, so it applies
    assert adapter is not None and adapter.matrix.shape == (384, 384)
    q = embedder.embed(["Where does Bo work now?", "What did Ana paint last weekend?"])
    kept = (adapter.apply(q) * q).sum(axis=1)  # ridge-penalized: a question keeps its direction
    assert ((kept > 0.5) & (kept < 1.0 - 1e-4)).all()


def test_the_command_writes_nowhere_it_is_not_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", ["fit_adapter", "--data", str(tmp_path / "x.json")])
    with pytest.raises(SystemExit) as stop:
        main()
    assert stop.value.code == 2
    assert "--out" in capsys.readouterr().err
