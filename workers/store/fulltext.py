"""BM25 over a namespace held in memory, analyzed the way the LanceDB index analyzes it.

The query service answers a small namespace's full-text searches from its snapshot
(workers.store.snapshots): a LanceDB full-text query costs tens of milliseconds however
few rows it reads, scoring a few thousand rows in memory well under one.

`analyze` follows the LanceDB index built by `Database.ensure_indexes` (`FTS()` defaults,
lance's tokenizer builder): words split on anything not alphanumeric, words of 40 bytes or
more dropped, lowercased, Snowball English stemming (PyStemmer), English stop words
removed after stemming, then ASCII folding. Scores are Okapi BM25 with lance's k1 = 1.2,
b = 0.75 and IDF log(1 + (N - df + 0.5) / (df + 0.5)), as bm25s computes them. One deliberate
difference: the statistics (N, df, average length) are the namespace's own, where the
LanceDB index counts every namespace of the table, so one tenant's data never moves
another's ranking.
"""

from __future__ import annotations

import math
import re
import threading
import unicodedata
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
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
    # `word_by_word`'s terms without its work per word: lowercasing ASCII moves no word
    # boundary, a character is a byte, and the stems of ASCII words need no folding
    return [t for t in _ascii_terms(_WORD.findall(text.lower())) if t is not None]


def _ascii_terms(words: list[str]) -> list[str | None]:
    """Each lowercased ASCII word's index term, None where it has none (empty, 40 bytes or
    more, or a stop word once stemmed): no folding, a character is a byte."""
    kept = [i for i, w in enumerate(words) if 0 < len(w) < MAX_TOKEN_BYTES]
    out: list[str | None] = [None] * len(words)
    for i, stem in zip(kept, _stem([words[i] for i in kept]), strict=True):
        out[i] = None if stem in STOP_WORDS else stem
    return out


def word_by_word(text: str) -> list[str]:
    """`analyze` for any text: split, then each word lowercased, measured and folded."""
    words = [w.lower() for w in _WORD.findall(text) if len(w.encode()) < MAX_TOKEN_BYTES]
    return [_fold(w) for w in _stem(words) if w not in STOP_WORDS]


class TextIndex:
    """BM25 scores of one column's texts: bm25s's Lucene variant, the same float32 scores,
    built with array operations.

    A namespace's index is built again after every write to its table (its snapshot is new)
    and a question waits for it, so it starts from the index it replaces (`before`) and
    analyzes only new text; bm25s builds with Python work per document and token, two to
    three times longer than a build from nothing here (see
    docs/decisions.md#full-text-indexes-are-built-with-array-operations).
    `tests/workers/store/test_fulltext.py` checks the scores, bit for bit, against bm25s's."""

    def __init__(
        self,
        texts: Sequence[str | None] | pa.Array | pa.ChunkedArray,
        before: tuple[TextIndex, np.ndarray] | None = None,
    ) -> None:
        """`before`: an index of the same column at an earlier version, and for each row the
        row of that index that held the same text (-1: none); those rows' terms are taken from
        it instead of analyzed again (a write adds a few rows to thousands)."""
        column = _strings(texts)
        n = self.size = len(column)
        if before is None:
            docs, terms, vocab = _postings(column)
            # one posting per (term, document) with its term frequency, grouped by term
            key, tf = np.unique(terms * n + docs, return_counts=True)
            term, doc = np.divmod(key, max(n, 1))
        else:
            term, doc, tf, vocab = _carried(column, *before)
        self._vocab, self._docs, self._tf = vocab, doc, tf
        df = np.bincount(term, minlength=len(vocab))
        self._indptr = np.concatenate([[0], np.cumsum(df)])
        idf = np.zeros(len(vocab), dtype=np.float32)
        for value in np.unique(df):  # Python floats, as bm25s computes each term's idf
            idf[df == value] = math.log(1 + (n - int(value) + 0.5) / (int(value) + 0.5))
        lengths = np.bincount(doc, weights=tf, minlength=n).astype(np.int64)
        mean = lengths.mean() if len(doc) else 1.0  # no term anywhere: no posting reads it
        norm = K1 * ((1 - B) + B * lengths.astype(np.float64) / mean)
        freq = tf.astype(np.float64)
        tfc = freq / (norm[doc] + freq)
        self._weights = (idf[term].astype(np.float64) * tfc).astype(np.float32)

    def share(self, word: str) -> float:
        """The fraction of rows that hold `word`'s term; of a word of several terms
        ("garden-app"), its rarest term's (0: a word with no term, or no rows)."""
        rows = []
        for t in analyze(word):
            term = self._vocab.get(t)
            rows.append(0 if term is None else int(self._indptr[term + 1] - self._indptr[term]))
        return min(rows) / self.size if rows and self.size else 0.0

    def scores(self, query: str) -> np.ndarray:
        """Every row's score for `query` (0: no query term); a term the query repeats counts
        once per repeat, as in LanceDB."""
        out = np.zeros(self.size, dtype=np.float32)
        for t in analyze(query):
            term = self._vocab.get(t)
            if term is not None:
                at = slice(self._indptr[term], self._indptr[term + 1])
                out[self._docs[at]] += self._weights[at]
        # Lucene's BM25 has a constant (k1 + 1) factor that bm25s's "lucene" leaves out
        return out * (K1 + 1)


def _strings(texts: Sequence[str | None] | pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    if not isinstance(texts, pa.Array):
        texts = pa.array(list(texts), pa.string())
    if pa.types.is_large_string(texts.type):  # the offsets `_ascii_words` reads
        texts = texts.cast(pa.string())
    return pc.fill_null(texts, "")


def _postings(
    column: pa.Array, vocab: dict[str, int] | None = None
) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """Every index term of the column (`analyze`'s terms) as its document and term id, and
    the term ids. ASCII documents are split and lowercased on their bytes, and each distinct
    word is measured, stemmed and checked once; so are documents whose only non-ASCII
    characters separate words (dashes, quotes, symbols), with those read as spaces. Any other
    document goes word by word. `vocab`: term ids given before, extended in place."""
    vocab = {} if vocab is None else vocab
    ascii_rows = pc.string_is_ascii(column).to_numpy(zero_copy_only=False)
    others = np.flatnonzero(~ascii_rows)
    spaced = _separators_spaced(column.filter(pa.array(~ascii_rows)).to_pylist())
    plain = np.asarray([t.isascii() for t in spaced], dtype=bool)
    now_ascii = [t for t, p in zip(spaced, plain, strict=True) if p]
    texts = pa.concat_arrays([column.filter(ascii_rows), pa.array(now_ascii, pa.string())])
    at, words = _ascii_words(pc.ascii_lower(texts))
    found = pc.dictionary_encode(words)
    term_of = np.asarray(
        [
            -1 if t is None else vocab.setdefault(t, len(vocab))
            for t in _ascii_terms(found.dictionary.to_pylist())
        ],
        dtype=np.int64,
    )
    terms = term_of[found.indices.to_numpy(zero_copy_only=False)]
    docs = np.concatenate([np.flatnonzero(ascii_rows), others[plain]])[at]
    doc_parts, term_parts = [docs[terms >= 0]], [terms[terms >= 0]]
    rest = [(row, text) for row, text, p in zip(others, spaced, plain, strict=True) if not p]
    split = [_WORD.findall(text) for _, text in rest]
    term = _word_terms({w for words in split for w in words})
    for (row, _), words in zip(rest, split, strict=True):
        ids = [vocab.setdefault(t, len(vocab)) for w in words if (t := term[w]) is not None]
        doc_parts.append(np.full(len(ids), row, dtype=np.int64))
        term_parts.append(np.asarray(ids, dtype=np.int64))
    return np.concatenate(doc_parts), np.concatenate(term_parts), vocab


def _carried(
    column: pa.Array, before: TextIndex, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, int]]:
    """The postings (term, document, frequency; by term, then document) and term ids of
    `column`, whose rows with `rows[i] >= 0` hold the text row `rows[i]` of `before` held:
    their postings are moved over, the other rows analyzed. Terms no row holds any more are
    left out of the ids."""
    n = len(column)
    kept = rows >= 0
    moved = np.full(before.size, -1, dtype=np.int64)
    moved[rows[kept]] = np.flatnonzero(kept)
    old_term = np.repeat(np.arange(len(before._vocab)), np.diff(before._indptr))
    at = moved[before._docs]
    still = at >= 0
    fresh = np.flatnonzero(~kept)
    docs, terms, vocab = _postings(column.filter(pa.array(~kept)), dict(before._vocab))
    key, counts = np.unique(terms * n + fresh[docs], return_counts=True)
    new_term, new_doc = np.divmod(key, max(n, 1))
    term = np.concatenate([old_term[still], new_term])
    doc = np.concatenate([at[still], new_doc])
    tf = np.concatenate([before._tf[still], counts])
    used = np.unique(term)
    if len(used) < len(vocab):  # ids in insertion order: compacted, they stay so
        names = list(vocab)
        vocab = {names[t]: i for i, t in enumerate(used.tolist())}
        renamed = np.zeros(len(names), dtype=np.int64)
        renamed[used] = np.arange(len(used))
        term = renamed[term]
    order = np.argsort(term * n + doc)
    return term[order], doc[order], tf[order], vocab


def _separators_spaced(texts: list[str]) -> list[str]:
    """Each text with its non-ASCII characters that are not word characters (`_WORD`'s) read
    as spaces: the same words, and a text with no other non-ASCII character is now ASCII."""
    found = {c for c in set().union(*texts) if not c.isascii()} if texts else set()
    separators = "".join(sorted(c for c in found if not _WORD.match(c)))
    if not separators:
        return texts
    spaces = re.compile(f"[{re.escape(separators)}]")
    return [spaces.sub(" ", t) for t in texts]


def _ascii_words(lowered: pa.Array) -> tuple[np.ndarray, pa.Array]:
    """The words of lowercased ASCII documents (runs of a-z and 0-9), in order, with the
    position of each one's document: what splitting on `[^a-z0-9]+` gives without its empty
    pieces, found on the bytes at once (Arrow's regex split takes about 30 ms a megabyte,
    and a namespace's nodes hold about a megabyte)."""
    n = len(lowered)
    if n == 0:
        return np.zeros(0, dtype=np.intp), pa.array([], pa.string())
    offsets = np.frombuffer(lowered.buffers()[1], np.int32)[lowered.offset : lowered.offset + n + 1]
    data = lowered.buffers()[2]
    raw = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    text = raw[offsets[0] : offsets[-1]]
    word = ((text >= ord("a")) & (text <= ord("z"))) | ((text >= ord("0")) & (text <= ord("9")))
    # a word begins after a non-word byte or at a document's first byte, and ends likewise
    edge = np.zeros(len(text) + 1, dtype=bool)
    edge[offsets - offsets[0]] = True
    before = np.concatenate([[False], word])
    after = np.concatenate([word, [False]])
    starts = np.flatnonzero(after & (edge | ~before))
    ends = np.flatnonzero(before & (edge | ~after))
    lengths = np.concatenate([[0], np.cumsum(ends - starts)]).astype(np.int32)
    words = pa.StringArray.from_buffers(
        len(starts), pa.py_buffer(lengths), pa.py_buffer(text[word].tobytes())
    )
    at = np.searchsorted(offsets - offsets[0], starts, side="right") - 1
    return at, words


def _word_terms(words: set[str]) -> dict[str, str | None]:
    """`word_by_word`'s term of each word, None where it has none, each word analyzed once
    (a namespace's other documents repeat most of their words)."""
    kept = [w for w in words if len(w.encode()) < MAX_TOKEN_BYTES]
    term: dict[str, str | None] = dict.fromkeys(words)
    for word, stem in zip(kept, _stem([w.lower() for w in kept]), strict=True):
        term[word] = None if stem in STOP_WORDS else _fold(stem)
    return term
