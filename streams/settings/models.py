"""The models the stages call: the embedding model and the LLM."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator

from streams.settings.group import Group, config


class EmbeddingSettings(Group):
    """A local sentence-transformers model (empty path: the bundled MiniLM), or an
    OpenAI-compatible endpoint (`text-embedding-3-small`, the paper's)."""

    model_config = config("embedding_")

    provider: Literal["local", "openai"] = Field(
        default="local",
        description="local (sentence-transformers) or openai (any compatible /v1/embeddings)",
    )
    model_path: str | None = Field(
        default=None, description="a local sentence-transformers directory (unset: bundled MiniLM)"
    )
    backend: Literal["auto", "torch", "onnx", "onnx-int8", "openvino-bf16"] = Field(
        default="auto",
        description="local MiniLM runtime, on a model exported from the bundled weights at first "
        "use: `auto` is `openvino-bf16` where the CPU computes bf16 (AVX-512 BF16 or AMX), "
        "else `onnx`; `openvino-bf16`: OpenVINO in bf16, within cosine 1e-4 of fp32 and about "
        "1.6 (AVX-512 BF16) to 2.7 (AMX) times as fast in batches (`lychee bench embedder`); "
        "`onnx`: ONNX Runtime in fp32 (the vectors of sentence-transformers on `torch`); "
        "`onnx-int8`: faster still but lower recall on long assistant replies "
        "([the choice](docs/decisions.md#bf16-minilm-by-default)). Each precision stores its "
        "vectors under its own model name, and a store refuses another's",
    )
    batch_size: int = Field(
        default=64,
        ge=1,
        description="texts per batch of a local model (on ONNX, at most 1,024 padded tokens)",
    )
    threads: int | None = Field(
        default=None,
        ge=0,
        description="ONNX Runtime threads of each process's model (0: one per core; unset: one "
        "in the segmenter and the indexer, which embed at once on shared cores, and one per core "
        "in the query service and the benchmarks) "
        "([why](docs/decisions.md#the-ingest-stages-run-their-model-on-one-thread))",
    )
    onnx_dir: str | None = Field(
        default=None,
        description="where ONNX exports are cached (unset: ~/.cache/lychee-memory/onnx)",
    )
    cache_entries: int = Field(
        default=20_000,
        ge=0,
        description="vectors kept by text (LRU, about 1.6 kB each; 0: off), so identical texts "
        "are embedded once",
    )
    model: str = Field(
        default="text-embedding-3-small",
        description="the OpenAI-compatible embedding model; tables remember model and "
        "dimension and refuse another",
    )
    base_url: str | None = Field(
        default=None, description="the OpenAI-compatible embeddings endpoint (unset: the LLM's)"
    )
    dim: int | None = Field(default=None, ge=1, description="its dimension (unset: probed)")
    timeout_s: float = Field(
        default=60.0, gt=0, description="one call to an OpenAI-compatible embeddings endpoint"
    )


class LLMSettings(Group):
    """An OpenAI-compatible LLM for the encoder, the planner and answers; unset: the offline
    extractive encoder, the heuristic planner and no answers."""

    model_config = config("llm_")

    base_url: str | None = Field(default=None, description="the LLM's OpenAI-compatible URL")
    model: str | None = Field(default=None, description="the LLM's model name")
    api_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("LYCHEE_LLM_API_KEY", "OPENAI_API_KEY"),
        description="its key (or OPENAI_API_KEY)",
    )
    first_token_timeout_s: float = Field(
        default=300.0,
        gt=0,
        description="longest wait for the first token of a streamed reply: the server reads "
        "the whole prompt first (a local model on a laptop: tens of tokens a second)",
    )
    token_gap_timeout_s: float = Field(
        default=60.0, gt=0, description="longest silence between two chunks of a streamed reply"
    )
    timeout_s: float = Field(
        default=3600.0,
        gt=0,
        description="total limit of one attempt however steadily it streams: a backstop, "
        "generous since a slow local model writes a segment's records in minutes (each reply "
        "is capped in tokens too); a reply still being written then is not retried",
    )
    context_tokens: int | None = Field(
        default=None,
        ge=256,
        description="the model's context window in tokens, where its server does not state one "
        "(llama.cpp's /props and model listings that carry a context length are read first); "
        "every prompt and its reply's cap fit in it, an answer's evidence cut to it (unset, "
        "with no window stated: prompts are sent whole)",
    )
    max_attempts: int = Field(
        default=5,
        ge=1,
        description="the encoder's attempts before its stage pauses (the planner and "
        "answerer, with a user waiting, stop after 3)",
    )

    @field_validator("base_url")
    @classmethod
    def _an_http_url(cls, v: str | None) -> str | None:
        if v and not re.match(r"https?://[^/\s]", v, re.IGNORECASE):
            raise ValueError(
                f"LYCHEE_LLM_BASE_URL ({v!r}) must be an http:// or https:// URL, "
                "e.g. http://127.0.0.1:8091/v1"
            )
        return v

    @property
    def configured(self) -> bool:
        return bool(self.base_url and self.model)

    @property
    def half_said(self) -> str | None:
        """Why the LLM path is off though one of its two settings is given, or None. Either
        alone has its uses (remote embeddings at the LLM's URL, a judge model given on the
        command line), so it is said, not refused."""
        if bool(self.base_url) == bool(self.model):
            return None
        given, missing = (
            ("LYCHEE_LLM_BASE_URL", "LYCHEE_LLM_MODEL")
            if self.base_url
            else ("LYCHEE_LLM_MODEL", "LYCHEE_LLM_BASE_URL")
        )
        return (
            f"{given} is set but {missing} is not: the encoder, planner and answers run "
            "offline; set both for the LLM path"
        )
