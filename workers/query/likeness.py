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
from itertools import chain
from typing import Protocol

import numpy as np
from scipy.sparse import csr_array

from workers.vocabulary import SIMILARITY_STOPWORDS

# Signature weights (sum to 1): shared turns, entities and wording say "same evidence" most
# strongly; a shared session or query is weaker (one session holds many distinct facts).
SIGNATURE_WEIGHTS: Mapping[str, float] = dict(
    session=0.15, entities=0.20, queries=0.10, nodes=0.15, turns=0.20, text=0.20
)
# values and items numbered before a process starts a new vocabulary: about 700 bytes an item
# besides its text, which it keeps alive (2,250 LoCoMo dev items, tracemalloc), so 100 MB or so
MAX_KEPT = 100_000
# an item's own parts, kept per item; what matched it ("queries", "nodes") is the request's
_OWN = ("session", "entities", "turns", "text")
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
    """Signature values numbered for the process, and the numbers of each item's own parts: a
    request reads some 300 items, mostly read by earlier requests, and building and numbering
    their signatures one by one each time would be most of the similarity's cost. Numbers
    are only compared within a part."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        # an item's own parts (`_OWN`), keyed by what they are made of
        self._own: dict[tuple[str, tuple[str, ...], tuple[str, ...], str], list[list[int]]] = {}
        self._lock = threading.Lock()  # two threads must not give one number to two values

    def numbers(self, values: frozenset[str]) -> list[int]:
        with self._lock:
            return [self._ids.setdefault(v, len(self._ids)) for v in values]

    def own(self, c: Comparable) -> list[list[int]]:
        """The numbers of the item's own parts, in `_OWN`'s order, as `_signature` has them."""
        key = (c.session_id, c.entities, c.turn_ids, c.text)
        got = self._own.get(key)
        if got is None:
            sig = _signature(c)
            got = self._own[key] = [self.numbers(sig[part]) for part in _OWN]
        return got

    @property
    def size(self) -> int:
        """Values and items kept."""
        return len(self._ids) + len(self._own)


_vocabulary = _Vocabulary()


def _current() -> _Vocabulary:
    """The process's vocabulary, a new one past MAX_KEPT values and items; a request keeps
    the one it started with, so its numbers stay consistent."""
    global _vocabulary
    if _vocabulary.size > MAX_KEPT:
        _vocabulary = _Vocabulary()
    return _vocabulary


class _Parts:
    """The signatures of one request, part by part: each signature's value numbers."""

    def __init__(self) -> None:
        self.n = 0
        self._vocabulary = _current()
        self._numbers: dict[str, list[list[int]]] = {part: [] for part in SIGNATURE_WEIGHTS}
        self._request_ids: dict[str, int] = {}  # the request's own parts, numbered for it alone

    def add(self, c: Comparable) -> None:
        for part, numbers in zip(_OWN, self._vocabulary.own(c), strict=True):
            self._numbers[part].append(numbers)
        ids = self._request_ids
        for part, values in (("queries", c.queries), ("nodes", c.node_ids)):
            self._numbers[part].append([ids.setdefault(v, len(ids)) for v in dict.fromkeys(values)])
        self.n += 1

    def overlaps(self, part: str, first: int) -> tuple[np.ndarray, np.ndarray] | None:
        """How many values of `part` each pair shares (the signatures from `first` on against
        every one) and how many each signature has; None when none has a value of it. A
        product of incidence matrices (signatures × the part's values among them), dense for
        a few values (sessions, the matched queries), sparse for many (text tokens): the same
        whole numbers either way."""
        lists = self._numbers[part]
        sizes = np.fromiter(map(len, lists), dtype=np.intp, count=self.n)
        if not sizes.any():
            return None
        values, compact = np.unique(
            np.fromiter(chain.from_iterable(lists), dtype=np.intp), return_inverse=True
        )
        if len(values) <= DENSE_VALUES:
            dense = np.zeros((self.n, len(values)))
            dense[np.repeat(np.arange(self.n), sizes), compact] = 1.0
            return dense[first:] @ dense.T, sizes.astype(np.float64)
        indptr = np.zeros(self.n + 1, dtype=np.intp)
        np.cumsum(sizes, out=indptr[1:])
        every = csr_array((np.ones(len(compact)), compact, indptr), shape=(self.n, len(values)))
        left = every[first:] if first else every
        return (left @ every.T).toarray(), sizes.astype(np.float64)


def _similarities(parts: _Parts, first: int) -> np.ndarray:
    """`_signature_sim` of each signature from `first` on against every one, bit for bit.

    Per part, the incidence matrix gives every pair's intersection size as a product, and the
    unions follow from the set sizes; the parts are then summed in the order
    `_signature_sim` sums them, each step the same float operation as there.
    """
    shape = (parts.n - first, parts.n)
    num = np.zeros(shape)
    den: float | np.ndarray = 0.0  # a number while every part so far is on every signature
    for part, weight in SIGNATURE_WEIGHTS.items():
        found = parts.overlaps(part, first)
        if found is None:
            continue
        inter, sizes = found
        union = np.add.outer(sizes[first:], sizes)
        union -= inter
        inter *= weight
        if sizes.all():  # every signature has the part: no pair is empty on both sides
            inter /= union
            num += inter
            den += weight
            continue
        some = union > 0  # a pair with neither value: its sums stay as they were
        np.divide(inter, union, out=inter, where=some)  # inter is 0.0 where neither has one
        num += inter
        if not isinstance(den, np.ndarray):
            den = np.full(shape, den)
        den += weight * some
    if isinstance(den, np.ndarray):
        np.divide(num, den, out=num, where=den > 0)
    elif den:
        num /= den
    return num


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
                self._parts.add(c)
            block = _similarities(self._parts, old)  # the new rows against all
            grown = np.empty((self._parts.n, self._parts.n))
            grown[:old, :old] = self._matrix
            grown[old:] = block
            grown[:old, old:] = block[:, :old].T
            self._matrix = grown
        at = np.fromiter((self._at[c.item_id] for c in candidates), dtype=np.intp)
        return self._matrix[np.ix_(at, at)]
