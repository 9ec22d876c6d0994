"""MiniLM on ONNX Runtime: the bundled weights exported locally, no network.

The sentence-transformers path spends most of a small call in Python and torch dispatch;
the same graph under ONNX Runtime gives the same vectors (fp32: cosine 1 - 1e-7) several times
faster per text on two cores. The export runs once per weights/toolchain at first use, under a
file lock so that stages starting together export once, and lands atomically in a cache dir.
int8 dynamic quantization (the MatMul weights, per channel, each feed-forward block's
down-projection left in fp32) is about three times faster again but changes the vectors (mean
cosine 0.995 to fp32), so it reports a different model name, and a store built with the one
refuses the other (`EmbeddingMismatch`). bf16 runs the fp32 export under OpenVINO
(`workers.embedding.openvino`).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from workers.embedding.base import Matrix
from workers.embedding.bounded import local_input_bytes
from workers.embedding.errors import OnnxExportError
from workers.embedding.model import Precision, bundled_path, onnx_model_name
from workers.embedding.openvino import Bf16Runner, bf16_width, query_width, same_width_batches

OPSET = 17
# the int8 file names its recipe: a cache of another recipe's export is not read as this one
_FILE: dict[Precision, str] = {"fp32": "fp32", "int8": "int8-mixed", "bf16": "fp32"}


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "lychee-memory" / "onnx"


class OnnxEmbedder:
    """Tokenizer (HF `tokenizers`) + ONNX transformer + mean pooling + L2 norm, as the
    sentence-transformers pipeline of the model directory does it."""

    def __init__(
        self,
        model_path: str | None = None,
        batch_size: int = 64,
        *,
        precision: Precision = "fp32",
        cache_dir: str | Path | None = None,
        threads: int = 0,
    ) -> None:
        from tokenizers import Tokenizer

        model_path = model_path or bundled_path()
        root = Path(model_path)
        max_len = _max_seq_length(root)
        _require_mean_pooling(root)
        # int8 quantizes a call's activations with one scale for the whole call, so a text's
        # vector would depend on what else is in it: one text a call keeps vectors, segments
        # and ids the same however texts arrive (a replay, another process's batches); bf16
        # keeps that by padding each text to a width of its own (`workers.embedding.openvino`)
        self.batch_size = 1 if precision == "int8" else batch_size
        self.model_name = onnx_model_name(model_path, precision)
        self.max_input_bytes = local_input_bytes(max_len)
        self.onnx_path = export_onnx(model_path, cache_dir or default_cache_dir(), precision)
        tok = Tokenizer.from_file(str(root / "tokenizer.json"))
        tok.enable_truncation(max_len)
        tok.no_padding()
        self._tok = tok
        self._max_len = max_len
        self._bf16 = precision == "bf16"
        self._batches = same_width_batches if self._bf16 else length_batches
        if self._bf16:
            runner = Bf16Runner(self.onnx_path, threads)
            self._run: Any = runner
            self._inputs = runner.inputs
        else:
            self._session = _ort_session(self.onnx_path, threads)
            self._run = lambda feed: self._session.run(None, feed)[0]
            self._inputs = {i.name for i in self._session.get_inputs()}
        self.dim = 0
        self.dim = int(self.embed(["probe"]).shape[1])

    def embed(self, texts: list[str]) -> Matrix:
        return self._embed(texts, self._width)

    def embed_queries(self, texts: list[str]) -> Matrix:
        """`embed` for a question's texts, which are compared and never stored: under bf16
        each is padded to at least `QUERY_WIDTH` tokens, so a question's few short texts make
        one call instead of one a width, and a text's vector still depends on itself only."""
        return self._embed(texts, self._query_width)

    def _embed(self, texts: list[str], width_of: Callable[[int], int]) -> Matrix:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        encs = self._tok.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: -len(encs[i].ids))
        out: list[Matrix] = [np.empty(0, dtype=np.float32)] * len(texts)
        widths = [width_of(len(encs[i].ids)) for i in order]  # widest first
        for part in self._batches(widths, self.batch_size, tokens=BATCH_TOKENS):
            idx = order[part]
            rows = self._forward([encs[i].ids for i in idx], widths[part.start])
            for i, row in zip(idx, rows, strict=True):
                out[i] = row
        return np.stack(out).astype(np.float32, copy=False)

    def _width(self, tokens: int) -> int:
        """The width a text is padded to: its own under ONNX Runtime, whose calls pad to their
        longest text, and under bf16 one its own length decides (`workers.embedding.openvino`)."""
        return bf16_width(tokens, self._max_len) if self._bf16 else tokens

    def _query_width(self, tokens: int) -> int:
        return query_width(tokens, self._max_len) if self._bf16 else tokens

    def _forward(self, ids: list[list[int]], width: int) -> Matrix:
        input_ids = np.zeros((len(ids), width), dtype=np.int64)
        mask = np.zeros((len(ids), width), dtype=np.int64)
        for r, row in enumerate(ids):
            input_ids[r, : len(row)] = row
            mask[r, : len(row)] = 1
        feed = {"input_ids": input_ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(input_ids)
        hidden = self._run(feed)
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return np.asarray(pooled / np.maximum(norms, 1e-12), dtype=np.float32)


# Padded tokens per model call. Past this a call is no faster per token and then slower (its
# activations outgrow the caches): 64 rows of 256 tokens took an eighth longer than calls of
# 1,024 tokens (docs/decisions.md#the-embedder-cuts-its-batches-by-length-as-well-as-count).
BATCH_TOKENS = 1024


def length_batches(
    lengths: list[int], size: int, slack: float = 1.5, tokens: int = BATCH_TOKENS
) -> list[slice]:
    """Batches of a longest-first list of token counts: at most `size` rows and `tokens`
    padded tokens (a row longer than that alone), and a new batch where a row is shorter than
    the batch's first by more than `slack` times.

    A batch is padded to its longest row, and the model's time follows the padded tokens
    whatever the width. Cut by count alone, a call of a few 60-token texts and many 6-token
    labels padded the labels tenfold (see
    docs/decisions.md#the-embedder-cuts-its-batches-by-length-as-well-as-count).
    """
    out: list[slice] = []
    start = 0
    for i, n in enumerate(lengths):
        rows = i - start
        if rows and (
            rows == size or n * slack < lengths[start] or (rows + 1) * lengths[start] > tokens
        ):
            out.append(slice(start, i))
            start = i
    if start < len(lengths):
        out.append(slice(start, len(lengths)))
    return out


def _ort_session(onnx_path: Path, threads: int) -> Any:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    # Idle pool threads sleep instead of spinning: every stage embeds in its own process
    # on the same cores, and a spinning pool takes the CPU the other stages need.
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(onnx_path), opts, providers=["CPUExecutionProvider"])


def export_onnx(model_path: str, cache_dir: str | Path, precision: Precision) -> Path:
    """The cached ONNX file of these weights at this precision, exported when missing."""
    root = Path(model_path)
    target_dir = Path(cache_dir) / _export_key(root)
    target = target_dir / f"model-{_FILE[precision]}.onnx"
    if target.is_file():
        return target
    target_dir.mkdir(parents=True, exist_ok=True)
    with open(target_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a stage starting beside us may be exporting
        if target.is_file():
            return target
        fp32 = target_dir / "model-fp32.onnx"
        if not fp32.is_file():
            _atomic(fp32, lambda tmp: _export_fp32(root, tmp))
        if precision == "int8":
            _atomic(target, lambda tmp: _quantize(fp32, tmp))
    return target


def _export_key(root: Path) -> str:
    """Weights, exporter and runtime versions: any change gives a fresh export."""
    from importlib.metadata import version

    h = hashlib.sha256()
    for name in ("config.json", "tokenizer.json"):
        if (root / name).is_file():
            h.update((root / name).read_bytes())
    for weights in sorted(root.glob("*.safetensors")) + sorted(root.glob("*.bin")):
        with open(weights, "rb") as f:
            h.update(hashlib.file_digest(f, "sha256").digest())
    # Versions from package metadata: importing torch would cost a cached start seconds.
    h.update(f"{version('torch')}|{version('onnxruntime')}|{OPSET}".encode())
    return h.hexdigest()[:20]


def _atomic(target: Path, write: Any) -> None:
    fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".onnx.tmp")
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _export_fp32(root: Path, out: Path) -> None:
    import warnings

    import torch
    from transformers import AutoModel

    try:
        model = AutoModel.from_pretrained(str(root)).eval()
    except (OSError, ValueError) as exc:
        raise OnnxExportError(f"cannot load {root} for the ONNX export: {exc}") from exc

    class Hidden(torch.nn.Module):
        """The last hidden state only, by keyword (positional arguments shifted in 5.x)."""

        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.inner(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    names = ["input_ids", "attention_mask", "token_type_ids"]
    # A padded sample, so the traced graph keeps the masking of padded positions.
    ids = torch.tensor([[101, 7592, 2088, 102], [101, 7592, 102, 0]], dtype=torch.long)
    mask = (ids != 0).long()
    dynamic = {n: {0: "batch", 1: "tokens"} for n in [*names, "last_hidden_state"]}
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                Hidden(model),
                (ids, mask, torch.zeros_like(ids)),
                str(out),
                input_names=names,
                output_names=["last_hidden_state"],
                dynamic_axes=dynamic,
                opset_version=OPSET,
                dynamo=False,
            )
    except Exception as exc:  # the exporter raises many types; all mean "no ONNX path"
        raise OnnxExportError(f"torch.onnx.export of {root} failed: {exc}") from exc


def _quantize(fp32: Path, out: Path) -> None:
    """Dynamic int8 on the MatMul weights, per channel, except the down-projections.

    A down-projection (a weight of more rows than columns: the feed-forward block's second
    layer) reads the activation's output, whose outliers a per-tensor int8 rounding of the
    activations loses most. Kept in fp32 they halve the vectors' error (1 - cosine to fp32,
    mean over sampled turns and labels: 0.0085 -> 0.0046) for a quarter more time than all
    MatMuls in int8, still about three times faster than fp32; all MatMuls in int8 lost
    recall (docs/decisions.md#int8-minilm-by-default).
    """
    try:
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:
        raise OnnxExportError(f"int8 quantization needs the `onnx` package: {exc}") from exc
    graph = onnx.load(str(fp32), load_external_data=False).graph
    shapes = {w.name: tuple(w.dims) for w in graph.initializer}
    down = [
        node.name
        for node in graph.node
        if node.op_type == "MatMul"
        and len(shape := shapes.get(node.input[1], ())) == 2
        and shape[0] > shape[1]
    ]
    quantize_dynamic(
        fp32,
        out,
        weight_type=QuantType.QInt8,
        per_channel=True,
        op_types_to_quantize=["MatMul"],
        nodes_to_exclude=down,
        extra_options={"MatMulConstBOnly": True},
    )


def _max_seq_length(root: Path) -> int:
    cfg = root / "sentence_bert_config.json"
    if cfg.is_file():
        return int(json.loads(cfg.read_text()).get("max_seq_length", 256))
    return 256


def _require_mean_pooling(root: Path) -> None:
    pooling = root / "1_Pooling" / "config.json"
    if pooling.is_file() and not json.loads(pooling.read_text()).get("pooling_mode_mean_tokens"):
        raise OnnxExportError(
            f"{root}: the ONNX backend does mean pooling only; use LYCHEE_EMBEDDING_BACKEND=torch"
        )
