"""Where a stored row came from, so that a forget removes only what predates it.

A forget fence (workers.forget) holds, per partition of `memory.exchanges`, the end offset
read before the forget was sent. A row keeps, per partition, the earliest offset of the
exchanges it was derived from (`"p:o"`), or `""` when one of them is unknown; it predates a
fence when any of them lies below it. Rows written after the forget from exchanges sent
after it (a stage that had not seen the forget yet) are therefore kept, and rows of a table
written before lineage was kept (no column) predate every fence.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from workers.forget import Source

COLUMN = "sources"
UNKNOWN = ""


def token(src: Source | None) -> str:
    return f"{src.partition}:{src.offset}" if src is not None else UNKNOWN


def merge(*lineages: Iterable[str]) -> list[str]:
    """The union of lineages: per partition the earliest offset, unknown kept once; the same
    whatever the order (rows merge occurrences order-independently)."""
    earliest: dict[int, int] = {}
    unknown = False
    for tok in (t for lin in lineages for t in lin):
        p, _, o = tok.partition(":")
        if not tok or not p.isdigit() or not o.isdigit():
            unknown = True
        elif earliest.get(int(p), int(o)) >= int(o):
            earliest[int(p)] = int(o)
    return ([UNKNOWN] if unknown else []) + [f"{p}:{o}" for p, o in sorted(earliest.items())]


def predates(lineage: Iterable[str] | None, fence: Mapping[int, int] | None) -> bool:
    """Whether a row with this lineage holds anything from before the fence (no fence: a
    forget of everything; no lineage: a row that cannot show it is newer)."""
    toks = list(lineage or ())
    if fence is None or not toks:
        return True
    for tok in toks:
        p, _, o = tok.partition(":")
        if not (p.isdigit() and o.isdigit()) or int(o) < fence.get(int(p), -1):
            return True  # unknown (or unreadable), or below the fence
    return False


def predating(data: pa.Table, among: Any, fence: Mapping[int, int] | None) -> pa.Array:
    """The rows of `data` selected by the boolean `among` whose lineage predates `fence`."""
    if fence is None or COLUMN not in data.column_names:
        return among
    mask = pc.fill_null(among, False)
    if isinstance(mask, pa.ChunkedArray):
        mask = mask.combine_chunks()
    chosen = np.flatnonzero(mask.to_numpy(zero_copy_only=False))
    out = np.zeros(data.num_rows, dtype=bool)
    lineages = data.column(COLUMN).take(pa.array(chosen, pa.int64())).to_pylist()
    for i, lin in zip(chosen, lineages, strict=True):
        out[i] = predates(lin, fence)
    return pa.array(out, pa.bool_())
