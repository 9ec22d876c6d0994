"""The benchmarks' errors, under the one root error."""

from __future__ import annotations

from schemas.errors import LycheeError


class BenchError(LycheeError, RuntimeError):
    """The benchmark cannot run as asked; the message says why."""
