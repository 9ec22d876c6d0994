"""bf16 MiniLM under OpenVINO against fp32, on the bundled weights' export (conftest.py).

The model tests skip, saying why, on a CPU that does not compute bf16.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.workers.embedding.samples import refusal, varied_texts
from workers.embedding import openvino
from workers.embedding.errors import OnnxExportError
from workers.embedding.local import bundled_model_info
from workers.embedding.onnx import OnnxEmbedder, export_onnx
from workers.embedding.openvino import (
    QUERY_WIDTH,
    WIDTH_STEP,
    bf16_width,
    query_width,
    same_width_batches,
)


@pytest.fixture(scope="module")
def bf16(onnx_dir: Path) -> OnnxEmbedder:
    if not openvino.computes_bf16():
        pytest.skip("this CPU does not compute bf16")
    return OnnxEmbedder(cache_dir=onnx_dir, batch_size=16, precision="bf16")


def test_bf16_vectors_are_within_a_rounding_of_fp32_but_named_apart(
    bf16: OnnxEmbedder, torch_vectors: np.ndarray
) -> None:
    got = bf16.embed(varied_texts())
    cos = (got * torch_vectors).sum(axis=1)
    assert cos.min() > 0.9995 and np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert not np.array_equal(got, torch_vectors)
    assert bf16.model_name == "bf16:all-MiniLM-L6-v2"
    assert bundled_model_info(backend="openvino-bf16") == (bf16.model_name, 384)


def test_a_bf16_vector_is_the_same_bits_whatever_else_is_in_its_call(bf16: OnnxEmbedder) -> None:
    texts = varied_texts()
    alone = np.stack([bf16.embed([t])[0] for t in texts])
    together = bf16.embed(texts)
    reordered = bf16.embed(texts[::-1])[::-1]
    halves = np.concatenate([bf16.embed(texts[1::2]), bf16.embed(texts[::2])])
    order = [*range(1, len(texts), 2), *range(0, len(texts), 2)]
    assert np.array_equal(alone, together)
    assert np.array_equal(alone, reordered)
    assert np.array_equal(alone[order], halves)


def test_a_questions_short_texts_make_one_call_and_keep_their_own_vectors(
    bf16: OnnxEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = ["sunrise", "when did she paint it", "painting a sunrise by the lake last summer"]
    alone = np.stack([bf16.embed_queries([t])[0] for t in texts])
    calls: list[tuple[int, ...]] = []
    run = bf16._run
    monkeypatch.setattr(
        bf16, "_run", lambda feed: calls.append(feed["input_ids"].shape) or run(feed)
    )
    together = bf16.embed_queries(texts)
    assert calls == [(3, QUERY_WIDTH)]
    assert np.array_equal(alone, together)
    assert ((together * bf16.embed(texts)).sum(axis=1) > 0.9999).all()
    calls.clear()
    bf16.embed(texts)
    assert len(calls) == 3  # stored texts are padded to their own widths


def test_bf16_width_is_the_texts_own_up_to_a_step_then_a_multiple_of_it() -> None:
    assert [bf16_width(n, 256) for n in (1, 5, WIDTH_STEP)] == [1, 5, WIDTH_STEP]
    assert [bf16_width(n, 256) for n in (9, 16, 17, 250, 256)] == [16, 16, 24, 256, 256]
    assert bf16_width(250, 252) == 252  # never past the model's input length
    assert all(bf16_width(n, 256) >= n for n in range(1, 257))
    assert [query_width(n, 256) for n in (1, QUERY_WIDTH, 33, 256)] == [
        QUERY_WIDTH,
        QUERY_WIDTH,
        40,
        256,
    ]
    assert query_width(3, 16) == 16


@pytest.mark.parametrize("seed", range(10))
def test_same_width_batches_hold_one_width_and_bound_rows_and_tokens(seed: int) -> None:
    rng = np.random.default_rng(seed)
    lengths = sorted(rng.integers(1, 256, int(rng.integers(0, 200))).tolist(), reverse=True)
    widths = [bf16_width(n, 256) for n in lengths]
    parts = same_width_batches(widths, 16, tokens=1024)
    assert [i for p in parts for i in range(len(widths))[p]] == list(range(len(widths)))
    for part in parts:
        rows = widths[part]
        assert len(set(rows)) == 1 and 1 <= len(rows) <= 16
        assert len(rows) * rows[0] <= 1024 or len(rows) == 1
    assert same_width_batches([24, 24, 16, 16, 16], 2, tokens=1024) == [
        slice(0, 2),
        slice(2, 4),
        slice(4, 5),
    ]


def test_a_store_of_bf16_vectors_refuses_fp32_naming_the_bf16_setting(
    bf16: OnnxEmbedder, tmp_path: Path
) -> None:
    said = refusal(tmp_path / "db", (bf16.model_name, bf16.dim), bundled_model_info(backend="onnx"))
    assert "holds bf16:all-MiniLM-L6-v2 embeddings" in said
    assert "set LYCHEE_EMBEDDING_BACKEND=openvino-bf16" in said


def test_bf16_on_a_cpu_without_it_is_refused_naming_the_fp32_setting(
    onnx_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from workers.embedding.model import bundled_path

    monkeypatch.setattr(openvino, "computes_bf16", lambda: False)
    with pytest.raises(OnnxExportError, match="LYCHEE_EMBEDDING_BACKEND=onnx for fp32"):
        openvino.Bf16Runner(export_onnx(bundled_path(), onnx_dir, "bf16"), threads=1)


def test_importing_openvino_sends_nothing_and_writes_nothing_home(tmp_path: Path) -> None:
    # a fresh interpreter, as a worker starts: no fork (the telemetry's sender), no ~/intel
    probe = (
        "import os\n"
        "forks = []\n"
        "real = os.fork\n"
        "os.fork = lambda: forks.append(1) or real()\n"
        "from workers.embedding.openvino import computes_bf16, openvino_module\n"
        "computes_bf16()\n"
        "import time; time.sleep(0.5)\n"
        "print(len(forks), 'CI' in os.environ, openvino_module().__name__)\n"
    )
    env = {**os.environ, "HOME": str(tmp_path)}
    env.pop("CI", None)
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "False", "openvino"]
    assert not (tmp_path / "intel").exists()


def test_bf16_runs_on_the_threads_it_is_given(bf16: OnnxEmbedder, onnx_dir: Path) -> None:
    one = OnnxEmbedder(cache_dir=onnx_dir, precision="bf16", threads=1)
    assert one._run._compiled.get_property("INFERENCE_NUM_THREADS") == 1
    assert np.array_equal(one.embed(varied_texts()), bf16.embed(varied_texts()))
