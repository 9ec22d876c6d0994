"""The query adapter: a linear map of question vectors, loaded from a file it was fitted to."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from workers.query.adapter import QueryAdapter, load_adapter
from workers.query.errors import AdapterError


def test_apply_maps_then_renormalizes_and_a_zero_shift_changes_nothing() -> None:
    v = np.asarray([[0.6, 0.8], [1.0, 0.0]], dtype=np.float32)
    assert np.allclose(QueryAdapter("m", np.zeros((2, 2), np.float32)).apply(v), v)
    swap = QueryAdapter("m", np.asarray([[-1.0, 1.0], [1.0, -1.0]], np.float32))  # v -> v swapped
    moved = swap.apply(v)
    assert np.allclose(moved, [[0.8, 0.6], [0.0, 1.0]])
    assert moved.dtype == np.float32 and np.allclose(np.linalg.norm(moved, axis=1), 1.0)


def test_it_fits_the_model_it_was_fitted_for_and_that_models_int8_export_only() -> None:
    a = QueryAdapter("all-MiniLM-L6-v2", np.zeros((384, 384), np.float32))
    assert a.fits("all-MiniLM-L6-v2", 384) and a.fits("int8-mixed:all-MiniLM-L6-v2", 384)
    assert not a.fits("text-embedding-3-small", 384)
    assert not a.fits("all-MiniLM-L6-v2", 768)


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    a = QueryAdapter("m", np.arange(9, dtype=np.float32).reshape(3, 3))
    a.save(tmp_path / "a.npz")
    b = load_adapter(tmp_path / "a.npz")
    assert b.model == "m" and np.array_equal(b.matrix, a.matrix)
    a.save(tmp_path / "p.npz", {"commit": "abc", "command": "python -m fit"})
    with np.load(tmp_path / "p.npz") as f:
        assert (str(f["commit"]), str(f["command"])) == ("abc", "python -m fit")
    assert np.array_equal(load_adapter(tmp_path / "p.npz").matrix, a.matrix)


@pytest.mark.parametrize("content", [b"not an npz", None], ids=["garbage", "not square"])
def test_a_file_that_is_not_an_adapter_is_refused_by_name(
    tmp_path: Path, content: bytes | None
) -> None:
    path = tmp_path / "bad.npz"
    if content is None:
        np.savez(path, model=np.asarray("m"), matrix=np.zeros((2, 3)))
    else:
        path.write_bytes(content)
    with pytest.raises(AdapterError, match="bad.npz"):
        load_adapter(path)
