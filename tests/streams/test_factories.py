"""The embedder every stage builds from settings."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from pydantic import ValidationError

from streams.factories import adapter_of, embedding_info, make_embedder, scorer_of
from streams.settings import Settings
from tests.fakes.openai_server import FakeOpenAI
from workers.query.adapter import QueryAdapter
from workers.query.errors import AdapterError
from workers.query.scorer import FEATURES, PROVENANCE, Scorer, load_scorer


def test_openai_embedder_from_settings_against_a_compatible_server() -> None:
    with FakeOpenAI(embedding_dim=16) as server:
        s = Settings.load(None, embedding={"provider": "openai", "base_url": server.url})
        emb = make_embedder(s)
        assert (emb.model_name, emb.dim) == ("text-embedding-3-small", 16)
        m = emb.embed(["a", "b", "c"])
        assert m.shape == (3, 16) and np.allclose(np.linalg.norm(m, axis=1), 1.0)
        assert embedding_info(s) == ("text-embedding-3-small", 16)
    # the segmenter picks the paper's surprise calibration for this model
    assert s.segmenter.params.calibration_for("text-embedding-3-small").center == 0.20


def test_local_embedding_info_reads_the_bundled_model_without_loading_it() -> None:
    from workers.embedding.openvino import computes_bf16

    onnx = Settings.load(None, embedding={"backend": "onnx"})
    assert embedding_info(onnx) == ("all-MiniLM-L6-v2", 384)
    # the default runs bf16 where the CPU computes it, and names its vectors so
    auto = "bf16:all-MiniLM-L6-v2" if computes_bf16() else "all-MiniLM-L6-v2"
    assert embedding_info(Settings.load(None)) == (auto, 384)


@pytest.mark.parametrize(
    ("setting", "default", "threads"),
    [({"threads": 1}, 0, 1), ({"threads": 2}, 1, 2), ({"threads": 0}, 1, 0), ({}, 1, 1)],
)
def test_the_onnx_model_runs_on_the_threads_the_settings_give_else_the_stages(
    setting: dict[str, int], default: int, threads: int
) -> None:
    from streams.factories import _backend

    onnx = _backend(Settings.load(None, embedding={**setting, "backend": "onnx"}), default)
    assert onnx._session.get_session_options().intra_op_num_threads == threads  # type: ignore[attr-defined]
    assert onnx.embed(["a short text"]).shape == (1, 384)


def test_local_embedding_info_int8_backend_names_its_vectors_apart() -> None:
    s = Settings.load(None, embedding={"backend": "onnx-int8"})
    assert embedding_info(s) == ("int8-mixed:all-MiniLM-L6-v2", 384)
    # the name keeps the ending the segmenter's calibration is matched by
    plain = s.segmenter.params.calibration_for("all-MiniLM-L6-v2")
    assert s.segmenter.params.calibration_for("int8-mixed:all-MiniLM-L6-v2") == plain


def test_make_embedder_repeated_text_is_embedded_once_by_the_endpoint() -> None:
    with FakeOpenAI(embedding_dim=16) as server:
        s = Settings.load(None, embedding={"provider": "openai", "base_url": server.url})
        emb = make_embedder(s)
        before = len(server.embedding_requests)  # the dimension probe
        first = emb.embed(["same text", "other", "same text"])
        second = emb.embed(["same text"])
        assert np.array_equal(first[0], second[0]) and np.array_equal(first[0], first[2])
        sent = [t for body in server.embedding_requests[before:] for t in body["input"]]
        assert sent == ["same text", "other"]


def test_query_adapter_off_by_default_a_path_for_the_model_or_one_for_another_refused(
    tmp_path: Path,
) -> None:
    minilm = SimpleNamespace(model_name="all-MiniLM-L6-v2", dim=384)
    other = SimpleNamespace(model_name="text-embedding-3-small", dim=384)
    assert adapter_of(Settings.load(None), minilm) is None  # type: ignore[arg-type]
    off = Settings.load(None, query={"adapter": "off"})
    assert adapter_of(off, minilm) is None  # type: ignore[arg-type]
    mine = tmp_path / "mine.npz"
    QueryAdapter("all-MiniLM-L6-v2", np.zeros((384, 384), np.float32)).save(mine)
    named = Settings.load(None, query={"adapter": str(mine)})
    loaded = adapter_of(named, minilm)  # type: ignore[arg-type]
    assert loaded is not None and loaded.model == "all-MiniLM-L6-v2"
    int8 = SimpleNamespace(model_name="int8-mixed:all-MiniLM-L6-v2", dim=384)  # the same geometry
    assert adapter_of(named, int8) is not None  # type: ignore[arg-type]
    with pytest.raises(
        AdapterError,
        match="LYCHEE_QUERY_ADAPTER=.*mine.npz: fitted for all-MiniLM-L6-v2.*not text-embedding",
    ):
        adapter_of(named, other)  # type: ignore[arg-type]
    for gone in ("fitted", str(tmp_path / "missing.npz")):
        with pytest.raises(ValidationError, match="no file at"):
            Settings.load(None, query={"adapter": gone})


def test_query_scorer_off_by_default_or_the_file_named(tmp_path: Path) -> None:
    assert scorer_of(Settings.load(None)) is None
    assert scorer_of(Settings.load(None, query={"scorer": "off"})) is None
    mine, n = tmp_path / "scorer.json", len(FEATURES)
    Scorer((0.5,) * n, (0.0,) * n, (1.0,) * n, -2.0).save(mine, dict.fromkeys(PROVENANCE, "x"))
    assert scorer_of(Settings.load(None, query={"scorer": str(mine)})) == load_scorer(mine)
    for gone in ("fitted", str(tmp_path / "missing.json")):
        with pytest.raises(ValidationError, match="no file at"):
            Settings.load(None, query={"scorer": gone})
