"""`BoundedEmbedder`: every text cut to a bounded size before a model sees it.

A model reads a bounded number of tokens of a text (MiniLM 256, OpenAI's embedding models
8,191). A local backend tokenizes all of a text before it truncates, so a 200,000-character
turn costs a tokenizer pass over all of it for 256 tokens; an embeddings API refuses an input
over its limit (HTTP 400, which dead-letters the message). So each text is cut first, here,
whatever the backend, to the first `max_input_bytes` bytes of its UTF-8 form (whole
characters: a prefix of the text). Each backend says its bound, by one of the two rules below.
"""

from __future__ import annotations

from typing import Any, Protocol

from workers.embedding.base import Embedder, Matrix, embed_queries

# WordPiece (the local models): a token is a word or a piece of one, at most a couple of dozen
# characters, and the blanks between words are no tokens at all. Conversation text runs about
# 4 to 6 characters a token, so 32 bytes a token ends far past the last token the model reads,
# and the vector of any text but one padded with long runs of blanks is the same as uncut.
LOCAL_BYTES_PER_TOKEN = 32

# Byte-level BPE (the OpenAI-compatible APIs): a token is at least one byte, so no more bytes
# than the model's tokens can pass its limit, whatever the text (prose, code, base64, emoji).
# That is about 1,800 tokens of English prose, more than a single vector holds of a text.
API_BYTES_PER_TOKEN = 1


def local_input_bytes(max_tokens: int) -> int:
    """The bound of a WordPiece model that reads `max_tokens` tokens of a text."""
    return max_tokens * LOCAL_BYTES_PER_TOKEN


def api_input_bytes(max_tokens: int) -> int:
    """The bound of a byte-level BPE model that refuses more than `max_tokens` tokens."""
    return max_tokens * API_BYTES_PER_TOKEN


class BoundedModel(Embedder, Protocol):
    """A backend that knows how much of a text it may be given."""

    max_input_bytes: int


def clip(text: str, max_bytes: int) -> str:
    """The longest prefix of `text` whose UTF-8 form fits in `max_bytes` bytes."""
    if len(text) * 4 <= max_bytes:  # no character is longer than 4 bytes
        return text
    head = text[:max_bytes]  # nor shorter than 1
    raw = head.encode("utf-8", "surrogatepass")
    if len(raw) <= max_bytes:
        return head
    end = max_bytes
    while raw[end] & 0xC0 == 0x80:  # a continuation byte: the character started before
        end -= 1
    return raw[:end].decode("utf-8", "surrogatepass")


class BoundedEmbedder:
    """The backend, given each text cut to its `max_input_bytes`; the rest is the backend's."""

    def __init__(self, inner: BoundedModel) -> None:
        self.inner = inner
        self.model_name = inner.model_name
        self.dim = inner.dim
        self.max_input_bytes = inner.max_input_bytes

    def embed(self, texts: list[str]) -> Matrix:
        return self.inner.embed([clip(t, self.max_input_bytes) for t in texts])

    def embed_queries(self, texts: list[str]) -> Matrix:
        return embed_queries(self.inner, [clip(t, self.max_input_bytes) for t in texts])

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (a copy being built): no recursion through it
            raise AttributeError(name)
        return getattr(self.inner, name)
