"""An exchange's vectors, and the raw turns that carry them to the indexer.

The segmenter embeds each exchange once (its boundary signals read the vector); its turns'
vectors travel with them on `memory.turns`, so the indexer writes raw turns without a model
call. What is never searched (an agent's tool items) costs the model nothing: it gets a
placeholder vector instead.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from schemas import Exchange, RawTurn
from workers.embedding import Embedder, Matrix


def embed_exchanges(
    embedder: Embedder, exchanges: Sequence[Exchange]
) -> list[tuple[Matrix, list[Matrix]]]:
    """One embedding call for the batch: per exchange, in order, its vector and one vector
    per turn (an exchange of one memory turn shares its vector with it). Matched by
    position: exchange ids repeat across sessions and namespaces. A turn that is not memory
    (`Turn.memory`: an agent's tool call or output) is left out of its exchange's text
    (`Exchange.remembered`), is never searched and costs the model nothing: its vector is
    the exchange's `placeholder`, as is the vector of an exchange of such turns only."""
    kept = [[turn for turn in ex.turns if turn.memory] for ex in exchanges]
    texts = [ex.remembered() for ex, mine in zip(exchanges, kept, strict=True) if mine]
    texts += [turn.rendered() for mine in kept if len(mine) > 1 for turn in mine]
    matrix = embedder.embed(texts) if texts else np.zeros((0, embedder.dim), dtype=np.float32)
    said = sum(1 for mine in kept if mine)
    whole, own = iter(matrix[:said]), iter(matrix[said:])  # the exchanges', their turns'
    out = []
    for ex, mine in zip(exchanges, kept, strict=True):
        if mine:
            vector = next(whole)
            aside = placeholder(ex, embedder.dim) if len(mine) < len(ex.turns) else vector
        else:
            vector = aside = placeholder(ex, embedder.dim)
        turns = [(next(own) if len(mine) > 1 else vector) if t.memory else aside for t in ex.turns]
        out.append((vector, turns))
    return out


def placeholder(ex: Exchange, dim: int) -> Matrix:
    """The vector of what is never searched, an exchange's turns that are not memory (and the
    exchange, when they are all it holds): a unit vector drawn from a digest of its place
    (the same on a replay), spread like a text's rather than one shared by all, which would
    crowd one point of the turns' vector index."""
    key = f"{ex.namespace}\0{ex.session_id}\0{ex.seq}".encode("utf-8", "surrogatepass")
    seed = int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big")
    v = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return v / np.float32(np.linalg.norm(v))


def raw_turns(ex: Exchange, turn_vecs: list[Matrix], model_name: str) -> list[RawTurn]:
    """The exchange's turns as `memory.turns` carries them, with their embeddings (an
    embedding endpoint's all-zero vector, which the contract refuses as having no
    direction, replaced by the exchange's `placeholder`: the turn is kept, found by its
    words)."""
    return [
        RawTurn(
            namespace=ex.namespace,
            session_id=ex.session_id,
            turn_id=tid,
            exchange_id=ex.exchange_id,
            seq=ex.seq,
            index=i,
            exchange_turns=len(ex.turns),
            role=turn.role,
            speaker=turn.speaker,
            text=turn.content,
            image_caption=turn.image_caption,
            memory=turn.memory,
            session_date=ex.session_date,
            created_at=turn.created_at,
            embedding=np.asarray(
                tvec if np.any(tvec) else placeholder(ex, len(tvec)), dtype=np.float32
            ).tolist(),
            embedding_model=model_name,
        )
        for i, (tid, turn, tvec) in enumerate(zip(ex.turn_ids(), ex.turns, turn_vecs, strict=True))
    ]
