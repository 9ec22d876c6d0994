"""How alike two candidates are: the weighted Jaccard of their signatures (DESIGN §8.4).

Selection's diversity term reads every pair of a pool of some 300 items at k = 100, twice a
request (the head's selection and the whole one), so `Likeness` computes the pairs at once,
one incidence product per signature part (dense for a few values, scipy.sparse for many),
each pair once a request, and in the same floats as the pairwise formula.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Protocol

import numpy as np
from scipy.sparse import csr_array

from workers.vocabulary import SIMILARITY_STOPWORDS

# Signature weights (sum to 1): shared turns, entities and wording say "same evidence" most
# strongly; a shared session or query is weaker (one session holds many distinct facts).
SIGNATURE_WEIGHTS: Mapping[str, float] = dict(
    session=0.15, entities=0.20, queries=0.10, nodes=0.15, turns=0.20, text=0.20
)
MAX_KEPT = 1_000_000  # values and sets numbered before a process starts a new vocabulary
# what matched an item in this request: a new set nearly every request, not worth keeping
_REQUEST_PARTS = frozenset({"queries", "nodes"})
_TOKEN = re.compile(r"\w+", re.UNICODE)
DENSE_VALUES = 64  # a part with at most this many values among a request's items: dense product


class Comparable(Protocol):
    """What a signature reads of a candidate (`workers.query.selection.Candidate`)."""

    @property
    def item_id(self) -> str: ...
    @property
    def session_id(self) -> str: ...
    @property
    def entities(self) -> tuple[str, ...]: ...
    @property
    def queries(self) -> tuple[str, ...]: ...
    @property
    def node_ids(self) -> tuple[str, ...]: ...
    @property
    def turn_ids(self) -> tuple[str, ...]: ...
    @property
    def text(self) -> str: ...


@lru_cache(maxsize=16384)  # the same records and turns come back question after question
def _tokens(text: str) -> frozenset[str]:
    """Lowercased word tokens without stopwords or single characters."""
    return frozenset(
        t for t in _TOKEN.findall(text.lower()) if len(t) > 1 and t not in SIMILARITY_STOPWORDS
    )


Signature = Mapping[str, frozenset[str]]


def _signature(c: Comparable) -> Signature:
    return {
        "session": frozenset([c.session_id]),
        "entities": frozenset(e.lower() for e in c.entities),
        "queries": frozenset(c.queries),
        "nodes": frozenset(c.node_ids),
        "turns": frozenset(c.turn_ids),
        "text": _tokens(c.text),
    }


def _signature_sim(a: Signature, b: Signature) -> float:
    num = den = 0.0
    for part, weight in SIGNATURE_WEIGHTS.items():
        union = a[part] | b[part]
        if not union:
            continue  # empty on both sides: no evidence either way, its weight is dropped
        num += weight * len(a[part] & b[part]) / len(union)
        den += weight
    return num / den if den else 0.0


def signature_similarity(a: Comparable, b: Comparable) -> float:
    """Weighted Jaccard of the two signatures (SIGNATURE_WEIGHTS), in [0, 1].

    Session is 1/0 equality; the others are Jaccard of entities (case-folded), matched
    queries, evidence nodes, turn ids and text tokens. A part empty on both sides is left out
    and the remaining weights renormalized, so identical candidates always score 1.
    """
    return _signature_sim(_signature(a), _signature(b))


class _Vocabulary:
    """Signature values numbered for the process, and the numbers of each item's own sets of
    values: a request reads some 300 items, mostly read by earlier requests, and numbering
    their values one by one each time would be most of the similarity's cost. Numbers are
    only compared within a part."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._sets: dict[frozenset[str], list[int]] = {}
        self._lock = threading.Lock()  # two threads must not give one number to two values

    def numbers(self, values: frozenset[str], keep: bool) -> list[int]:
        """The numbers of `values`; `keep`: remember the set (an item's own, seen again)."""
        got = self._sets.get(values) if keep else None
        if got is None:
            with self._lock:
                got = [self._ids.setdefault(v, len(self._ids)) for v in values]
                if keep:
                    self._sets[values] = got
        return got

    @property
    def size(self) -> int:
        """Values and sets kept."""
        return len(self._ids) + len(self._sets)


_vocabulary = _Vocabulary()


def _current() -> _Vocabulary:
    """The process's vocabulary, a new one past MAX_KEPT values and sets; a request keeps the
    one it started with, so its numbers stay consistent."""
    global _vocabulary
    if _vocabulary.size > MAX_KEPT:
        _vocabulary = _Vocabulary()
    return _vocabulary


class _Parts:
    """The signatures of one request as (signature, value number) pairs, part by part."""

    def __init__(self) -> None:
        self.n = 0
        self._vocabulary = _current()
        self._pairs: dict[str, tuple[list[int], list[int]]] = {
            part: ([], []) for part in SIGNATURE_WEIGHTS
        }

    def add(self, sig: Signature) -> None:
        for part, (rows, cols) in self._pairs.items():
            numbers = self._vocabulary.numbers(sig[part], part not in _REQUEST_PARTS)
            rows.extend([self.n] * len(numbers))
            cols.extend(numbers)
        self.n += 1

    def overlaps(self, part: str, first: int) -> tuple[np.ndarray, np.ndarray] | None:
        """How many values of `part` each pair shares (the signatures from `first` on against
        every one) and how many each signature has; None when none has a value of it. A
        product of incidence matrices (signatures × the part's values among them), dense for
        a few values (sessions, the matched queries), sparse for many (text tokens): the same
        whole numbers either way."""
        rows, cols = self._pairs[part]
        if not cols:
            return None
        values, compact = np.unique(np.asarray(cols), return_inverse=True)
        if len(values) <= DENSE_VALUES:
            dense = np.zeros((self.n, len(values)))
            dense[rows, compact] = 1.0
            return dense[first:] @ dense.T, dense.sum(axis=1)
        every = csr_array((np.ones(len(cols)), (rows, compact)), shape=(self.n, len(values)))
        left = every[first:] if first else every
        return (left @ every.T).toarray(), np.asarray(every.sum(axis=1)).ravel()


def _similarities(parts: _Parts, first: int) -> np.ndarray:
    """`_signature_sim` of each signature from `first` on against every one, bit for bit.

    Per part, the incidence matrix gives every pair's intersection size as a product, and the
    unions follow from the set sizes; the parts are then summed in the order
    `_signature_sim` sums them.
    """
    shape = (parts.n - first, parts.n)
    num = np.zeros(shape)
    den = np.zeros(shape)
    for part, weight in SIGNATURE_WEIGHTS.items():
        found = parts.overlaps(part, first)
        if found is None:
            continue
        inter, sizes = found
        union = sizes[first:, None] + sizes[None, :] - inter
        if sizes.all():  # every signature has the part: no pair is empty on both sides
            num += weight * inter / union
            den += weight
            continue
        some = union > 0  # adding 0.0 where a pair has neither leaves its sums as they were
        num += np.divide(weight * inter, union, out=np.zeros(shape), where=some)
        den += weight * some
    return np.divide(num, den, out=np.zeros(shape), where=den > 0)


class Likeness:
    """One request's pairwise similarities, grown as its selections read new items: a pair is
    computed once, whichever selection reads it first."""

    def __init__(self) -> None:
        self._at: dict[str, int] = {}
        self._parts = _Parts()
        self._matrix = np.zeros((0, 0))

    def of(self, candidates: Sequence[Comparable]) -> np.ndarray:
        """`signature_similarity` of every pair of `candidates`, bit for bit the same floats."""
        new = {c.item_id: c for c in candidates if c.item_id not in self._at}
        if new:
            old = self._parts.n
            for c in new.values():
                self._at[c.item_id] = self._parts.n
                self._parts.add(_signature(c))
            block = _similarities(self._parts, old)  # the new rows against all
            grown = np.empty((self._parts.n, self._parts.n))
            grown[:old, :old] = self._matrix
            grown[old:] = block
            grown[:old, old:] = block[:, :old].T
            self._matrix = grown
        at = np.fromiter((self._at[c.item_id] for c in candidates), dtype=np.intp)
        return self._matrix[np.ix_(at, at)]
