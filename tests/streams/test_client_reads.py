"""The client's direct reads of LanceDB (records, turns, history) against a store that is not
there: an error naming where it looked, and nothing made there."""

from __future__ import annotations

from pathlib import Path

import pytest

from streams.client import MemoryClient
from streams.client.memory import _missing_directory
from streams.errors import StoreMissing
from streams.settings import Settings


@pytest.mark.asyncio
async def test_reading_a_local_store_that_does_not_exist_names_it_and_makes_nothing(
    tmp_path: Path,
) -> None:
    absent = tmp_path / "data" / "lancedb"
    client = MemoryClient(Settings.load(None, store={"uri": str(absent)}))
    for read in (client.list_records, client.list_turns, client.history):
        with pytest.raises(
            StoreMissing, match=f"no memory store at {absent}: set LYCHEE_LANCEDB_URI"
        ):
            await read("ns")
    assert not (tmp_path / "data").exists()


def test_an_object_stores_uri_or_an_existing_directory_is_not_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "my store").mkdir()
    for there in ("s3://bucket/lancedb", "memory://x", str(tmp_path), "~/my store"):
        assert not _missing_directory(there), there
    for there in (f"file://{tmp_path}/my%20store", f"file:{tmp_path}/my store"):
        assert not _missing_directory(there), there
    for absent in (f"file://{tmp_path}/nothing", "~/nothing", "relative/nothing"):
        assert _missing_directory(absent), absent
