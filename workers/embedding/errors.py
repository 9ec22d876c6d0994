"""The embedding adapters' errors, under the one root error."""

from __future__ import annotations

from schemas.errors import LycheeError


class OnnxExportError(LycheeError, RuntimeError):
    """The local export, quantization or runtime could not run (missing package, unusual
    model, a CPU without bf16)."""
