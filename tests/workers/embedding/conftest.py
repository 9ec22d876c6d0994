"""The bundled weights' ONNX export, once per test module, and texts of every kind.

The export runs into a temporary cache dir (tens of seconds on a busy 2-core machine); the
tests skip, saying why, only when the exporter cannot run here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.workers.embedding.samples import varied_texts
from workers.embedding.errors import OnnxExportError
from workers.embedding.local import LocalEmbedder
from workers.embedding.onnx import export_onnx


@pytest.fixture(scope="module")
def onnx_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cache = tmp_path_factory.mktemp("onnx")
    try:
        from workers.embedding.model import bundled_path

        export_onnx(bundled_path(), cache, "int8")  # exports fp32 on the way
    except (ImportError, OnnxExportError) as exc:
        pytest.skip(f"the ONNX export cannot run here: {exc}")
    return cache


@pytest.fixture(scope="module")
def torch_vectors() -> np.ndarray:
    return LocalEmbedder().embed(varied_texts())
