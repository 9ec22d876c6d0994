"""The wording of a question: its type, names, key phrases and compared items (DESIGN §8.2).

Deterministic rules over tokens; the heuristic planner builds its plan from these, and the
LLM planner's reply is checked against the same names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from schemas.plan import QuestionType
from workers.query.planner.dates import DATE, MONTH_WORD
from workers.vocabulary import (
    AUXILIARIES,
    MONTH_NUMBERS,
    QUESTION_STOPWORDS,
    QUESTION_WORDS,
    WEEKDAYS,
    wordset,
)

_DETERMINERS = wordset("the a an my his her their our your its this that these those")
_CONNECTORS = wordset("or and both either neither versus vs")
_NOT_NAMES = QUESTION_WORDS | AUXILIARIES | frozenset(MONTH_NUMBERS) | frozenset(WEEKDAYS) | {"i"}

_PRIOR = re.compile(
    r"\byou\s+(said|told|recommended|suggested|mentioned|gave|wrote|listed|proposed|advised"
    r"|shared|named)\b|\bdid\s+you\b|\byour\s+(previous|earlier|last|prior)\b",
    re.IGNORECASE,
)
_ADVICE = re.compile(
    r"\b(recommend\w*|suggest\w*|advice|advise|tips?)\b|\bshould\s+i\b"
    r"|\byou\s+think\s+i\s+should\b|\bwhat\s+should\b",
    re.IGNORECASE,
)
_TEMPORAL = re.compile(
    r"\bwhen\b|\b(what|which)\s+(date|day|year|month|week|time)\b|\bhow\s+long\b"
    r"|\bhow\s+often\b|\bhow\s+many\s+(days|weeks|months|years|hours)\b|\b(before|after)\b",
    re.IGNORECASE,
)
_COMPARISON = re.compile(
    r"\bcompar\w*\b|\bboth\b|\bdifferen\w*\b|\b(more|less|fewer)\b.*\bthan\b|\b\w+er\s+than\b"
    r"|\bversus\b|\bvs\b|\bor\b(?!\s+(not|so|something|anything|what)\b)",
    re.IGNORECASE,
)
_AGGREGATE = re.compile(
    r"\bhow\s+many\b|\blist\b|\ball\b|\btotal\b|\bwhich\b.*\b(have|has|had)\b"
    r"|\bwhat\s+(are|were)\b",
    re.IGNORECASE,
)
_TYPE_RULES = (
    (QuestionType.prior_assistant_response, _PRIOR),
    (QuestionType.personalized_advice, _ADVICE),
    (QuestionType.temporal, _TEMPORAL),
    (QuestionType.comparison, _COMPARISON),
    (QuestionType.aggregate, _AGGREGATE),
)


# a question about the whole history ("in what order did I bring up ...", "summarize how my
# project progressed across our conversations"): its evidence is spread over the sessions
_HISTORY = re.compile(
    r"\b(?:throughout|across|over the course of|in all of|during)\s+(?:all\s+)?(?:of\s+)?"
    r"(?:our|my|the|these)\s+(?:\w+\s+)?(?:conversations?|discussions?|sessions?|chats?)\b"
    r"|\b(?:in\s+)?(?:what|which)\s+order\b|\border\s+in\s+which\b"
    r"|\bsummar(?:y|ize|ise|ized|ised)\b|\bhow\s+(?:has|have|did)\b.*\b(?:progress|evolve|develop)\w*",
    re.IGNORECASE,
)


def about_the_history(question: str) -> bool:
    """Whether the question asks about the conversation's whole history (an order, a
    summary, a progression): its evidence is one part in each session, not the best five."""
    return bool(_HISTORY.search(question))


# the request around the topic of a question about the history ("in what order did I bring up
# the different aspects of X across our chats? only three items"): words of the frame, which
# would otherwise become queries of their own
_HISTORY_FRAME = wordset(
    """can could would will you me give list walk through order which brought bring up raised
    mention mentioned aspects different various comprehensive clear complete detailed brief
    short summary summarize summarise overview conversations conversation discussions
    sessions chats chat throughout across course items only points steps how way ways
    progress progressed evolved developed changed two three four five six seven eight nine ten"""
)


def history_topic(question: str) -> str:
    """What a question about the history asks about: its content words without the frame of
    the request, so "list", "order" or "summary" do not become queries of their own."""
    return " ".join(
        t.text
        for t in tokens(question)
        if t.is_word
        and t.text.lower() not in QUESTION_STOPWORDS
        and t.text.lower() not in _HISTORY_FRAME
    )


def question_type_of(question: str) -> QuestionType:
    """The first rule whose wording matches, in order of specificity; else `single`."""
    if not any(t.lower() not in QUESTION_STOPWORDS for t in _words(question)):
        return QuestionType.other
    for qtype, pattern in _TYPE_RULES:
        if pattern.search(question):
            return qtype
    return QuestionType.single


# -- tokens, names, key phrases --------------------------------------------------------------

_TOKEN = re.compile(r"\w+(?:['’]\w+)*|[^\w\s]")
_SENTENCE_END = frozenset('.!?:;"“”')
# A capitalized word right after one of these is more likely a place than a person.
_PLACE_PREPOSITIONS = wordset("in at to from near into around across through")


@dataclass(frozen=True)
class Token:
    text: str
    is_word: bool
    sentence_start: bool = False
    date_span: tuple[int, int] | None = None  # the date expression the token belongs to

    @property
    def norm(self) -> str:
        """Lowercase, without a possessive 's."""
        return _strip_possessive(self.text).lower()

    @property
    def capitalized(self) -> bool:
        return self.is_word and self.text[0].isupper()


_END = Token(".", False)


def _date_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of dates and capitalized month names, overlaps merged."""
    spans = [m.span() for m in DATE.finditer(text)]
    spans += [m.span() for m in MONTH_WORD.finditer(text) if m.group(0)[0].isupper()]
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def tokens(text: str) -> list[Token]:
    spans = _date_spans(text)
    out: list[Token] = []
    start = True
    for m in _TOKEN.finditer(text):
        word = m.group(0)[0].isalnum() or m.group(0)[0] == "_"
        span = next((s for s in spans if s[0] <= m.start() < s[1]), None)
        out.append(Token(m.group(0), word, start and word, span))
        if word:
            start = False
        elif m.group(0) in _SENTENCE_END:
            start = True
    return out


def _words(text: str) -> list[str]:
    return [t.text for t in tokens(text) if t.is_word]


def _strip_possessive(text: str) -> str:
    return re.sub(r"['’]s$", "", text)


def _mentioned_speakers(question: str, speakers: Sequence[str]) -> list[str]:
    found: list[tuple[int, str]] = []
    for name in dict.fromkeys(s.strip() for s in speakers if s.strip()):
        forms = sorted({name, name.split()[0]}, key=len, reverse=True)
        pattern = "|".join(re.escape(f) for f in forms)
        if m := re.search(rf"(?<!\w)(?:{pattern})(?!\w)", question):
            found.append((m.start(), name))
    return [name for _, name in sorted(found)]


def named_people(question: str, speakers: Sequence[str] = ()) -> list[str]:
    """Names in the question, in order of first mention.

    With `speakers`, the speakers mentioned (whole name or first name, case-sensitive).
    Otherwise runs of capitalized words that do not open a sentence, are not question
    words, auxiliaries, months or weekdays, and do not follow a place preposition
    ("to Oslo"): without a speaker list, fewer routes is the safer mistake.
    """
    if speakers:
        return _mentioned_speakers(question, speakers)
    names: list[str] = []
    run: list[str] = []
    previous = ""
    for tok in [*tokens(question), _END]:
        if (
            tok.capitalized
            and not tok.sentence_start
            and tok.norm not in _NOT_NAMES
            and (run or previous not in _PLACE_PREPOSITIONS)
        ):
            run.append(_strip_possessive(tok.text))
        else:
            if run and (name := " ".join(run)) not in names:
                names.append(name)
            run = []
        previous = tok.text.lower() if tok.is_word else ""
    return names


def key_phrase(question: str) -> str:
    """The question without question words, auxiliaries, 'how many/much/long/often' and
    punctuation; dates are kept as written."""
    kept: list[str] = []
    previous = ""
    span: tuple[int, int] | None = None
    for tok in tokens(question):
        if tok.date_span is not None:
            if tok.date_span != span:
                kept.append(question[tok.date_span[0] : tok.date_span[1]])
            span = tok.date_span
            continue
        low = tok.text.lower()
        skip = (
            not tok.is_word
            or low in QUESTION_WORDS
            or low in AUXILIARIES
            or low == "ago"
            or (previous == "how" and low in {"many", "much", "long", "often"})
        )
        if not skip:
            kept.append(tok.text)
        previous = low if tok.is_word else ""
    return " ".join(kept)


def noun_phrases(question: str, limit: int | None = 3) -> list[str]:
    """Up to `limit` runs of consecutive content words (None: every run), in order;
    stopwords, punctuation, numbers and dates break a run (the temporal filter carries the
    dates). A number right after a run ends it as its last word: "locker code 17", "room
    204" name one thing, which the number alone tells from its neighbours."""
    runs: list[str] = []
    run: list[str] = []
    toks = [*tokens(question), _END]
    for i, tok in enumerate(toks):
        content = (
            tok.is_word
            and tok.date_span is None
            and tok.norm not in QUESTION_STOPWORDS
            and tok.text.lower() not in QUESTION_STOPWORDS
        )
        if content and not tok.text.isdigit():
            run.append(tok.text)
            continue
        if run and tok.is_word and tok.date_span is None and _whole_number(toks, i):
            run.append(tok.text)
        if run:
            runs.append(" ".join(run))
        run = []
    return runs[:limit]


def _whole_number(toks: Sequence[Token], i: int) -> bool:
    """Whether token `i` is a number of its own: digits not followed by a separator and more
    digits ("2,500", "3.4.1" are not cut to their first part)."""
    after = toks[i + 1 : i + 3]
    split = len(after) == 2 and after[0].text in ",." and after[1].text[:1].isdigit()
    return toks[i].text.isdigit() and not split


def normalized(query: str) -> str:
    return " ".join(query.casefold().split())


def unique_queries(queries: Iterable[str], cap: int) -> list[str]:
    """Whitespace-collapsed, blank-free, first of each case-insensitive duplicate, at most `cap`."""
    out: dict[str, str] = {}
    for q in queries:
        text = " ".join(q.split())
        if text and normalized(text) not in out:
            out[normalized(text)] = text
            if len(out) == cap:
                break
    return list(out.values())


# -- compared items -------------------------------------------------------------------------


def _item_right(toks: list[Token], start: int) -> tuple[list[str], int]:
    """The item after a connector: determiners, then a capitalized run or up to 3 content words."""
    i = start
    det: list[str] = []
    while i < len(toks) and toks[i].is_word and toks[i].text.lower() in _DETERMINERS:
        det.append(toks[i].text)
        i += 1
    content: list[str] = []
    proper = i < len(toks) and toks[i].capitalized
    while i < len(toks) and toks[i].is_word and len(content) < 3:
        tok = toks[i]
        if (proper and not tok.capitalized) or (not proper and tok.norm in QUESTION_STOPWORDS):
            break
        content.append(tok.text)
        i += 1
    return det + content, len(content)


def _item_left(toks: list[Token], end: int, size: int) -> list[str]:
    """The item before a connector, at most as long as the item after it."""
    i = end
    content: list[str] = []
    proper = i >= 0 and toks[i].capitalized
    while i >= 0 and toks[i].is_word and len(content) < max(size, 1):
        tok = toks[i]
        if (proper and not tok.capitalized) or (not proper and tok.norm in QUESTION_STOPWORDS):
            break
        content.insert(0, tok.text)
        i -= 1
    if content and i >= 0 and toks[i].is_word and toks[i].text.lower() in _DETERMINERS:
        content.insert(0, toks[i].text)
    return content


def compared_items(question: str) -> list[str]:
    """The two items around the first ' or ' (else ' and '): "tea or coffee" -> [tea, coffee]."""
    toks = tokens(question)
    for connector in ("or", "and"):
        for c, tok in enumerate(toks):
            if not tok.is_word or tok.text.lower() != connector:
                continue
            right, size = _item_right(toks, c + 1)
            left = _item_left(toks, c - 1, size)
            if size and left and normalized(" ".join(left)) != normalized(" ".join(right)):
                return [" ".join(left), " ".join(right)]
    return []


def without_items(text: str, others: Sequence[str]) -> str:
    """`text` with the other items (and a connector next to each) removed."""
    toks = [t for t in tokens(text) if t.is_word]
    drop: set[int] = set()
    for other in others:
        span = [t.norm for t in tokens(other) if t.is_word]
        for i in range(len(toks) - len(span) + 1):
            if span and [t.norm for t in toks[i : i + len(span)]] == span:
                drop.update(range(i, i + len(span)))
                for j in (i - 1, i + len(span)):
                    if 0 <= j < len(toks) and toks[j].text.lower() in _CONNECTORS:
                        drop.add(j)
                break
    kept: list[str] = []
    for i, t in enumerate(toks):
        if i in drop or t.text.lower() in {"both", "either", "neither"}:
            continue
        if t.date_span is None:
            kept.append(t.text)
        elif i == 0 or toks[i - 1].date_span != t.date_span:
            kept.append(text[t.date_span[0] : t.date_span[1]])
    return " ".join(kept)


def speaker_of(text: str, names: Sequence[str]) -> str | None:
    inside = [n for n in names if re.search(rf"(?<!\w){re.escape(n)}(?!\w)", text)]
    return inside[0] if len(inside) == 1 else None


# ", and who ...", " and where ...": a second question joined to the first
_JOINED = re.compile(r",?\s+and\s+(?=(?:who|whom|whose|what|where|when|which|why|how)\b)", re.I)
MIN_PART_WORDS = 3  # "... and when?" asks no question of its own
_SUBJECT_PRONOUNS = re.compile(r"\b(?:he|she|they|him|her|them|his|their)\b", re.I)


def joined_questions(question: str, names: Sequence[str]) -> list[str]:
    """The questions a coordinated question asks ("Where did Ana stay and who did she travel
    with?"), each on its own; a pronoun of a later part becomes the one person named
    before it ("who did Ana travel with?"). One part: `[question]`."""
    parts = [p.strip(" ,") for p in _JOINED.split(question) if p.strip(" ,")]
    if len(parts) < 2 or any(len(p.split()) < MIN_PART_WORDS for p in parts):
        return [question]
    person = names[0] if len(names) == 1 else None

    def named(part: str) -> str:
        if person is None or person in part:
            return part
        return _SUBJECT_PRONOUNS.sub(
            lambda m: f"{person}'s" if m.group().lower() in ("his", "their") else person, part
        )

    return [parts[0].rstrip("?") + "?", *(named(p) for p in parts[1:])]
