"""The synthetic production-size store of `lychee bench latency --synthetic`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest


def test_synthetic_store_spreads_rows_evenly_and_links_within_namespaces(
    embedder, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    from workers.evaluation import synthetic
    from workers.store import EvidenceStore

    store = EvidenceStore(str(tmp_path / "db"), embedder.model_name, embedder.dim)
    info = synthetic.build(store, embedder, 1200, 4, pool=32, chunk=500)
    assert info.rows == {"records": 1200, "turns": 1200, "nodes": 600}
    rs = store
    assert [rs.count("records", ns) for ns in info.namespaces] == [300] * 4
    assert [rs.count("turns", ns) for ns in info.namespaces] == [300] * 4
    rows = rs.table("records").search().limit(None).to_arrow()  # type: ignore[union-attr]
    norms = np.linalg.norm(np.stack(rows.column("vector").to_numpy(zero_copy_only=False)), axis=1)
    assert np.allclose(norms, 1.0, atol=1e-5)
    owner = dict(
        zip(rows.column("id").to_pylist(), rows.column("namespace").to_pylist(), strict=True)
    )
    for node in rs.table("nodes").search().limit(None).to_list():  # type: ignore[union-attr]
        assert node["record_ids"] and all(owner[r] == node["namespace"] for r in node["record_ids"])
    with pytest.raises(ValueError, match="at least one record per namespace"):
        synthetic.build(store, embedder, 3, 4)
