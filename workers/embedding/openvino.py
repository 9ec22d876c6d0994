"""MiniLM's ONNX export in bf16 under OpenVINO, on CPUs that compute bf16.

bf16 matrix products embed texts 1.6 (AVX-512 BF16) to 2.7 (AMX) times as fast as fp32
(`lychee bench embedder`, batches of 64; long assistant replies faster still), and the vectors
stay within cosine 0.99997 of fp32 (int8's: 0.995 on average;
docs/decisions.md#bf16-minilm-by-default). They are still not fp32's, so they carry their
own model name (`workers.embedding.model`).

A bf16 vector rounds every intermediate value, so a difference in the last bit of an fp32 sum
can move it: a text padded to another width got a vector up to 6e-4 away from its vector
alone. A text's vector depends on its width only, not on the other rows of its call, so each
text is padded to a width its own length decides (`bf16_width`) and batched with texts of
that width: its vector is the same whatever it is batched with (a replay, another process's
batches). Widths in steps of eight tokens keep a call from being a text or two.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from workers.embedding.errors import OnnxExportError


def openvino_module() -> ModuleType:
    """`openvino`, imported without its telemetry.

    Importing `openvino` sends a usage event to Google Analytics from a forked process, and
    writes a client id under ~/intel, unless the user opted out (`openvino_telemetry`: on by
    default, off in a CI job). A memory service does not report on its users, and a fork
    beside LanceDB's runtime can deadlock the child, so the import runs as a CI job's would;
    nothing else this module calls sends anything."""
    loaded: ModuleType | None = sys.modules.get("openvino")
    if loaded is not None:
        return loaded
    saved = os.environ.get("CI")
    os.environ["CI"] = "true"
    try:
        module = importlib.import_module("openvino")
    finally:
        if saved is None:
            del os.environ["CI"]
        else:
            os.environ["CI"] = saved
    return module


@functools.cache
def computes_bf16() -> bool:
    """Whether OpenVINO's CPU plugin runs bf16 natively here (else it would run fp32)."""
    core = openvino_module().Core()
    return "BF16" in core.get_property("CPU", "OPTIMIZATION_CAPABILITIES")


class Bf16Runner:
    """The export compiled for bf16 inference; callable like an ONNX Runtime session's run,
    from any thread (each thread has its own infer request)."""

    def __init__(self, onnx_path: Path, threads: int) -> None:
        if not computes_bf16():
            raise OnnxExportError(
                "this CPU does not compute bf16 (no AVX-512 BF16 or AMX): "
                "set LYCHEE_EMBEDDING_BACKEND=onnx for fp32"
            )
        config: dict[str, Any] = {
            "INFERENCE_PRECISION_HINT": "bf16",
            "PERFORMANCE_HINT": "LATENCY",
            "NUM_STREAMS": 1,
        }
        if threads > 0:
            config["INFERENCE_NUM_THREADS"] = threads
        core = openvino_module().Core()
        self._compiled = core.compile_model(core.read_model(str(onnx_path)), "CPU", config)
        self.inputs = {i.get_any_name() for i in self._compiled.inputs}
        self._local = threading.local()

    def __call__(self, feed: Mapping[str, np.ndarray]) -> np.ndarray:
        request = getattr(self._local, "request", None)
        if request is None:
            request = self._local.request = self._compiled.create_infer_request()
        request.infer(dict(feed))
        return np.asarray(request.get_output_tensor(0).data, dtype=np.float32).copy()


WIDTH_STEP = 8


def bf16_width(tokens: int, cap: int) -> int:
    """The width a text of `tokens` is padded to: its own up to WIDTH_STEP (labels of a few
    tokens would otherwise pad severalfold), else the next multiple of WIDTH_STEP, at most
    `cap` (the model's input length, which truncation keeps every text within)."""
    if tokens <= WIDTH_STEP:
        return tokens
    return min(-(-tokens // WIDTH_STEP) * WIDTH_STEP, cap)


# A question's texts (the question, its variants, a word alone) are short and of many widths,
# one model call each under `bf16_width`; padded to at least this many tokens they make one.
QUERY_WIDTH = 32


def query_width(tokens: int, cap: int) -> int:
    """The width a text that is compared and never stored is padded to: `bf16_width`, at
    least QUERY_WIDTH (at most `cap`)."""
    return min(max(QUERY_WIDTH, bf16_width(tokens, cap)), cap)


def same_width_batches(widths: list[int], size: int, tokens: int) -> list[slice]:
    """Batches of a longest-first list of widths, each of one width: at most `size` rows and
    `tokens` padded tokens (a row wider than that alone)."""
    out: list[slice] = []
    start = 0
    for i, n in enumerate(widths):
        rows = i - start
        if rows and (n != widths[start] or rows == size or (rows + 1) * n > tokens):
            out.append(slice(start, i))
            start = i
    if start < len(widths):
        out.append(slice(start, len(widths)))
    return out
