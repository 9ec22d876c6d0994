"""The embedder every stage builds from settings."""

from __future__ import annotations

import numpy as np

from streams.factories import embedding_info, make_embedder
from streams.settings import Settings
from tests.fakes.openai_server import FakeOpenAI


def test_openai_embedder_from_settings_against_a_compatible_server() -> None:
    with FakeOpenAI(embedding_dim=16) as server:
        s = Settings(_env_file=None, embedding_provider="openai", embedding_base_url=server.url)  # type: ignore[call-arg]
        emb = make_embedder(s)
        assert (emb.model_name, emb.dim) == ("text-embedding-3-small", 16)
        m = emb.embed(["a", "b", "c"])
        assert m.shape == (3, 16) and np.allclose(np.linalg.norm(m, axis=1), 1.0)
        assert embedding_info(s) == ("text-embedding-3-small", 16)
    # the segmenter picks the paper's surprise calibration for this model
    assert s.segmenter.calibration_for("text-embedding-3-small").center == 0.20


def test_local_embedding_info_reads_the_bundled_model_without_loading_it() -> None:
    assert embedding_info(Settings(_env_file=None)) == ("all-MiniLM-L6-v2", 384)  # type: ignore[call-arg]
