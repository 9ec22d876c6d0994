"""An OpenAI-compatible `/v1/embeddings` endpoint, its HTTP errors translated into what the
stage does about them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from workers.embedding.base import Matrix
from workers.embedding.bounded import api_input_bytes
from workers.errors import Refused, TemporarilyUnavailable, Unprocessable

if TYPE_CHECKING:
    import openai

MAX_INPUT_TOKENS = 8_191  # one input of OpenAI's embedding models (text-embedding-3-*, ada-002)
MAX_REQUEST_TOKENS = 300_000  # all the inputs of one request together, on the same API


class OpenAIEmbedder:
    """An OpenAI-compatible `/v1/embeddings` endpoint; sync, since `embed` runs in a thread."""

    def __init__(
        self,
        client: openai.OpenAI,
        model: str = "text-embedding-3-small",
        *,
        dim: int | None = None,
        batch_size: int = 256,
        max_tokens: int = MAX_INPUT_TOKENS,
    ) -> None:
        self.client = client
        self.model_name = model
        self.batch_size = batch_size
        self.max_input_bytes = api_input_bytes(max_tokens)
        # The protocol wants `dim` up front: ask the server once when it is not given.
        self.dim = dim if dim is not None else 0
        if dim is None:
            self.dim = int(self.embed(["probe"]).shape[1])

    def embed(self, texts: list[str]) -> Matrix:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        rows: list[list[float]] = []
        for part in request_batches(texts, self.batch_size, MAX_REQUEST_TOKENS):
            # The API rejects empty strings; a space embeds as "nothing" just as well.
            rows.extend(self._create([t if t.strip() else " " for t in part]))
        if len(rows) != len(texts):
            raise TemporarilyUnavailable(
                f"{self.model_name}: the endpoint returned {len(rows)} embeddings for {len(texts)} texts"
            )
        out = np.asarray(rows, dtype=np.float32)
        if self.dim and out.shape[1] != self.dim:
            raise Refused(
                f"{self.model_name}: expected dim {self.dim}, got {out.shape[1]}",
                hint="LYCHEE_EMBEDDING_MODEL / LYCHEE_EMBEDDING_DIM do not match the endpoint",
            )
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return np.asarray(out / np.where(norms == 0, 1, norms), dtype=np.float32)

    def _create(self, batch: list[str]) -> list[list[float]]:
        """One request; the client's errors come out as what the stage does about them."""
        import openai

        try:
            # "float" explicitly: not every compatible server speaks the client's base64 default.
            resp = self.client.embeddings.create(
                model=self.model_name, input=batch, encoding_format="float"
            )
        except openai.APIConnectionError as exc:  # APITimeoutError included
            raise TemporarilyUnavailable(
                f"{self.model_name}: embeddings endpoint unreachable ({type(exc).__name__})"
            ) from exc
        except openai.APIStatusError as exc:
            raise endpoint_error(self.model_name, exc) from exc
        return [d.embedding for d in sorted(resp.data, key=lambda d: d.index)]


def request_batches(texts: list[str], size: int, max_bytes: int) -> list[list[str]]:
    """The texts in order, in runs of at most `size` texts and `max_bytes` UTF-8 bytes together
    (a longer text alone): a token is at least a byte, so a run keeps within the API's cap on
    the tokens of one request."""
    out: list[list[str]] = []
    run: list[str] = []
    total = 0
    for text in texts:
        n = len(text.encode("utf-8", "surrogatepass"))
        if run and (len(run) == size or total + n > max_bytes):
            out.append(run)
            run, total = [], 0
        run.append(text)
        total += n
    if run:
        out.append(run)
    return out


def endpoint_error(model: str, exc: openai.APIStatusError) -> Exception:
    """The stage's view of an HTTP error from an embeddings endpoint (STYLE 5).

    429 and 5xx (and 408/409): the endpoint is busy or failing, pause and retry (honouring
    Retry-After). 400/413/422: this input can never be embedded, dead-letter the message.
    Any other 4xx (401, 403, 404...): configuration, pause with a hint, never dead-letter.
    """
    from workers.llm.policy import retry_after_s

    code = exc.status_code
    what = f"{model}: embeddings endpoint answered HTTP {code}"
    if code in (408, 409, 429) or code >= 500:
        return TemporarilyUnavailable(what, retry_after_s(exc))
    if code in (400, 413, 422):
        return Unprocessable(f"{what}: {_message(exc)}")
    return Refused(
        what, hint="check LYCHEE_LLM_API_KEY, LYCHEE_EMBEDDING_BASE_URL and LYCHEE_EMBEDDING_MODEL"
    )


def _message(exc: openai.APIStatusError) -> str:
    body = exc.body if isinstance(exc.body, dict) else {}
    err = body.get("error", body)
    text = err.get("message") if isinstance(err, dict) else None
    return str(text or exc.message)[:500]
