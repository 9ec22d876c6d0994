"""BM25 over a namespace held in memory, analyzed the way the LanceDB index analyzes it.

The query service answers a small namespace's full-text searches from its snapshot
(workers.store.snapshots): a LanceDB full-text query costs tens of milliseconds however
few rows it reads, scoring a few thousand rows in memory well under one.

`analyze` follows the LanceDB index built by `Database.ensure_indexes` (`FTS()` defaults,
lance's tokenizer builder): words split on anything not alphanumeric, words of 40 bytes or
more dropped, lowercased, Snowball English stemming (PyStemmer), English stop words
removed after stemming, then ASCII folding. Scores are Okapi BM25 with lance's k1 = 1.2,
b = 0.75 and IDF log(1 + (N - df + 0.5) / (df + 0.5)), computed with bm25s. One deliberate
difference: the statistics (N, df, average length) are the namespace's own, where the
LanceDB index counts every namespace of the table, so one tenant's data never moves
another's ranking.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Sequence

import bm25s
import numpy as np
import Stemmer
from bm25s.stopwords import STOPWORDS_EN_PLUS

K1, B = 1.2, 0.75
MAX_TOKEN_BYTES = 40
# the stop words of lance's English analyzer: NLTK's English list (checked word by word
# against a LanceDB index; bm25s ships the same list)
STOP_WORDS = frozenset(STOPWORDS_EN_PLUS)
_WORD = re.compile(r"[^\W_]+")
_stemmer = threading.local()  # a PyStemmer object is not safe to share between threads


def _stem(words: list[str]) -> list[str]:
    stemmer = getattr(_stemmer, "english", None)
    if stemmer is None:
        stemmer = _stemmer.english = Stemmer.Stemmer("english")
    stemmed: list[str] = stemmer.stemWords(words)
    return stemmed


def _fold(word: str) -> str:
    if word.isascii():
        return word
    decomposed = unicodedata.normalize("NFKD", word)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def analyze(text: str) -> list[str]:
    """The index terms of `text`, in order, repeats kept."""
    if not text.isascii():
        return word_by_word(text)
    # `word_by_word`'s terms with no work per word in Python: lowercasing ASCII moves no
    # word boundary, a character is a byte, and the stems of ASCII words need no folding
    words = [w for w in _WORD.findall(text.lower()) if len(w) < MAX_TOKEN_BYTES]
    return [w for w in _stem(words) if w not in STOP_WORDS]


def word_by_word(text: str) -> list[str]:
    """`analyze` for any text: split, then each word lowercased, measured and folded."""
    words = [w.lower() for w in _WORD.findall(text) if len(w.encode()) < MAX_TOKEN_BYTES]
    return [_fold(w) for w in _stem(words) if w not in STOP_WORDS]


class TextIndex:
    """BM25 scores of one column's texts."""

    def __init__(self, texts: Sequence[str | None]) -> None:
        self.size = len(texts)
        terms = [analyze(t or "") for t in texts]
        self._vocab: dict[str, int] = {}
        if any(terms):
            self._bm25 = bm25s.BM25(k1=K1, b=B, method="lucene")
            self._bm25.index(terms, show_progress=False)
            self._vocab = self._bm25.vocab_dict

    def scores(self, query: str) -> np.ndarray:
        """Every row's score for `query` (0: no query term); a term the query repeats counts
        once per repeat, as in LanceDB."""
        ids = [self._vocab[t] for t in analyze(query) if t in self._vocab]
        if not ids:
            return np.zeros(self.size, dtype=np.float32)
        # bm25s's "lucene" scores leave out BM25's constant (k1 + 1) factor; put it back so
        # the figures are LanceDB's
        return np.asarray(self._bm25.get_scores(ids), dtype=np.float32) * (K1 + 1)
