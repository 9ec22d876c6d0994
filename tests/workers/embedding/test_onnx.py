"""The ONNX Runtime embedder against the sentence-transformers one, on the bundled weights.

The export is the `onnx_dir` fixture's (conftest.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from tests.workers.embedding.samples import refusal, varied_texts
from workers.embedding.bounded import BoundedEmbedder
from workers.embedding.errors import OnnxExportError
from workers.embedding.local import bundled_model_info
from workers.embedding.model import Precision
from workers.embedding.onnx import OnnxEmbedder, export_onnx, length_batches
from workers.store import EmbeddingMismatch, EvidenceStore


def test_onnx_fp32_matches_sentence_transformers(onnx_dir: Path, torch_vectors: np.ndarray) -> None:
    emb = OnnxEmbedder(cache_dir=onnx_dir, batch_size=16)
    got = emb.embed(varied_texts())
    assert got.shape == torch_vectors.shape == (len(varied_texts()), 384)
    assert np.abs(got - torch_vectors).max() < 1e-4
    assert (got * torch_vectors).sum(axis=1).min() >= 0.9999
    assert (emb.model_name, emb.dim) == bundled_model_info()  # same vectors, same name
    # one at a time gives the same rows as batched (padding masked out)
    singles = np.stack([emb.embed([t])[0] for t in varied_texts()[:12]])
    assert np.abs(singles - got[:12]).max() < 1e-4


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_onnx_vectors_do_not_depend_on_what_else_is_in_the_call(
    onnx_dir: Path, precision: Precision
) -> None:
    emb = OnnxEmbedder(cache_dir=onnx_dir, batch_size=8, precision=precision)
    texts = varied_texts()
    together = emb.embed(texts)
    alone = np.stack([emb.embed([t])[0] for t in texts])
    assert np.abs(together - alone).max() < 1e-5


def test_onnx_given_a_200000_character_text_through_the_bound_embeds_its_prefix(
    onnx_dir: Path,
) -> None:
    emb = OnnxEmbedder(cache_dir=onnx_dir)
    bounded = BoundedEmbedder(emb)
    text = " ".join(["river budget violin quarterly migraine"] * 5_000)[:200_000]
    assert bounded.max_input_bytes == 8_192  # 256 tokens, 32 bytes a token
    vec = bounded.embed([text])
    assert np.array_equal(vec, emb.embed([text[:8_192]]))
    assert np.abs(vec - emb.embed([text])).max() < 1e-5  # the model reads 256 tokens anyway


@pytest.mark.parametrize("seed", range(20))
def test_length_batches_bound_rows_and_padding_and_keep_the_order(seed: int) -> None:
    rng = np.random.default_rng(seed)
    lengths = sorted(rng.integers(1, 120, int(rng.integers(0, 200))).tolist(), reverse=True)
    parts = length_batches(lengths, 16, tokens=600)
    assert [i for p in parts for i in range(len(lengths))[p]] == list(range(len(lengths)))
    for part in parts:
        rows = lengths[part]
        assert 1 <= len(rows) <= 16
        assert all(n * 1.5 >= rows[0] for n in rows)  # no row padded past 1.5 times its length
        assert len(rows) * rows[0] <= 600  # the padded tokens of a call
    # a cut only where the count, the length or the tokens call for it: batches as long as allowed
    for a, b in zip(parts, parts[1:], strict=False):
        rows = b.start - a.start
        assert (
            rows == 16
            or lengths[b.start] * 1.5 < lengths[a.start]
            or (rows + 1) * lengths[a.start] > 600
        )


def test_length_batches_put_a_few_long_texts_apart_from_many_short_ones() -> None:
    assert length_batches([60, 58, 7, 6, 6, 5], 64) == [slice(0, 2), slice(2, 6)]
    assert length_batches([60, 58, 7, 6, 6, 5], 3) == [slice(0, 2), slice(2, 5), slice(5, 6)]
    assert length_batches([], 64) == []


def test_length_batches_hold_long_texts_to_a_token_budget() -> None:
    assert length_batches([256, 250, 240, 230, 200], 64, tokens=512) == [
        slice(0, 2),
        slice(2, 4),
        slice(4, 5),
    ]
    assert length_batches([900, 800], 64, tokens=512) == [slice(0, 1), slice(1, 2)]  # alone


def test_onnx_int8_is_close_but_named_apart(onnx_dir: Path, torch_vectors: np.ndarray) -> None:
    emb = OnnxEmbedder(cache_dir=onnx_dir, precision="int8")
    got = emb.embed(varied_texts())
    cos = (got * torch_vectors).sum(axis=1)
    assert cos.mean() > 0.95 and np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert emb.model_name == "int8-mixed:all-MiniLM-L6-v2"
    assert bundled_model_info(backend="onnx-int8") == (emb.model_name, 384)


def test_onnx_int8_keeps_the_down_projections_in_fp32_and_stays_closer_to_fp32(
    onnx_dir: Path, torch_vectors: np.ndarray
) -> None:
    import onnx
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from workers.embedding.model import bundled_path

    int8 = export_onnx(bundled_path(), onnx_dir, "int8")
    graph = onnx.load(str(int8)).graph
    weights = {w.name: tuple(w.dims) for w in graph.initializer}
    plain = [weights.get(n.input[1]) for n in graph.node if n.op_type == "MatMul"]
    # the six feed-forward down-projections (1536 -> 384) stay fp32 MatMuls; the rest is int8
    assert plain.count((1536, 384)) == 6
    assert sum(n.op_type in ("MatMulInteger", "DynamicQuantizeMatMul") for n in graph.node) >= 30
    # every MatMul in int8 (the earlier recipe) strays further from the fp32 vectors
    everything = onnx_dir / "all-int8.onnx"
    quantize_dynamic(
        int8.parent / "model-fp32.onnx",
        everything,
        weight_type=QuantType.QInt8,
        per_channel=True,
        op_types_to_quantize=["MatMul"],
    )
    mixed = OnnxEmbedder(cache_dir=onnx_dir, precision="int8")
    err_mixed = 1 - (mixed.embed(varied_texts()) * torch_vectors).sum(axis=1).mean()
    mixed._session = ort.InferenceSession(str(everything), providers=["CPUExecutionProvider"])
    err_all = 1 - (mixed.embed(varied_texts()) * torch_vectors).sum(axis=1).mean()
    assert err_mixed < 0.7 * err_all


def test_a_store_of_the_earlier_all_int8_vectors_is_refused_without_a_setting_to_try(
    tmp_path: Path,
) -> None:
    EvidenceStore(str(tmp_path / "db"), "int8:all-MiniLM-L6-v2", 384).table("records", create=True)
    with pytest.raises(EmbeddingMismatch) as refused:
        EvidenceStore(str(tmp_path / "db"), "int8-mixed:all-MiniLM-L6-v2", 384).table("records")
    said = str(refused.value)
    assert "holds int8:all-MiniLM-L6-v2 embeddings" in said
    assert "Use the same model, or point LYCHEE_LANCEDB_URI at a new store" in said


def test_onnx_int8_vectors_refused_by_a_store_of_fp32_vectors(
    onnx_dir: Path, tmp_path: Path
) -> None:
    name, dim = bundled_model_info()
    EvidenceStore(str(tmp_path / "db"), name, dim).table("records", create=True)
    int8 = OnnxEmbedder(cache_dir=onnx_dir, precision="int8")
    with pytest.raises(EmbeddingMismatch):
        EvidenceStore(str(tmp_path / "db"), name, dim).db.check_embedder(int8)
    with pytest.raises(EmbeddingMismatch, match="int8-mixed:all-MiniLM-L6-v2") as refused:
        EvidenceStore(str(tmp_path / "db"), int8.model_name, int8.dim).table("records")
    # both models named, and the setting that reads the store
    said = str(refused.value)
    assert "holds all-MiniLM-L6-v2 embeddings" in said
    assert "embeds with int8-mixed:all-MiniLM-L6-v2" in said
    assert "set LYCHEE_EMBEDDING_BACKEND=onnx (or torch" in said


def test_onnx_fp32_refused_by_a_store_of_int8_vectors_naming_the_int8_setting(
    onnx_dir: Path, tmp_path: Path
) -> None:
    int8 = OnnxEmbedder(cache_dir=onnx_dir, precision="int8")
    said = refusal(tmp_path / "db", (int8.model_name, int8.dim), bundled_model_info(backend="onnx"))
    assert "holds int8-mixed:all-MiniLM-L6-v2 embeddings" in said
    assert "embeds with all-MiniLM-L6-v2 (384)" in said
    assert "set LYCHEE_EMBEDDING_BACKEND=onnx-int8" in said


def test_onnx_export_cached_second_use_does_not_export(onnx_dir: Path) -> None:
    from workers.embedding.model import bundled_path

    first = export_onnx(bundled_path(), onnx_dir, "fp32")
    stamp = os.stat(first).st_mtime_ns
    again = export_onnx(bundled_path(), onnx_dir, "fp32")
    assert again == first and os.stat(again).st_mtime_ns == stamp
    assert not list(first.parent.glob("*.tmp"))  # atomic: no half-written file left


def test_onnx_export_of_a_directory_without_weights_raises(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    with pytest.raises(OnnxExportError, match="cannot load"):
        export_onnx(str(tmp_path / "model"), tmp_path / "cache", "fp32")
