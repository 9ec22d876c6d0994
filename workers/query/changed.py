"""A stated change first: for a question about the present, a later statement that something
changed ("we just moved to Lisbon", "I left and started a new job") or that says how things
stand now ("I'm in Lisbon these days", "we now live in Lisbon") moves right above an
earlier statement of the reply's first items that it is like, without a link.

The offline rules link values only (numbers, amounts, days), so a move, a job or a tool that
changes reaches the reply as two statements in retrieval's order, and the earlier one often
leads: it names what the question asks about ("where do I live" finds "I live in Porto"
before "we moved to Lisbon"). Word overlap cannot tell that the two speak of one thing, so
their vectors do: the model's cosine of the two clauses at least `MIN_ALIKE` (unrelated
statements of one person, "I work at a bank" beside "I switched editors", read 0.2-0.35;
a move beside where one lived, a new job beside the old one, 0.45-0.6, with MiniLM). The
clauses, not the items: a window or a message says several things ("I live in Porto and I
work as a data engineer", a reply below it), and its whole text is like no one change. The
earlier item's clause is the one most like the question (what it answers), the change's the
one that states it. A reorder inside the first items: what the reply holds does not change,
only which comes first.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from schemas import EvidenceItem
from workers.store.segments import When, said_after

CHANGE_HEAD = 3  # the first items a stated change can move above: what an answer reads first
MIN_ALIKE = 0.4  # cosine of two statements about one thing (module docstring)
OPENING_WORDS = 60  # the words of an item read for its clauses: what it opens with
MIN_CLAUSE_WORDS = 3  # shorter pieces ("Hi", "Big news") state nothing

# where a text's clauses end: a sentence, a line, a comma, or "and"/"but" before a new
# subject; a window's "Ann:" before each turn is a clause of its own, too short to keep
_CLAUSE_BREAK = re.compile(
    r"(?<=[.!?;:])\s+|\n+|,\s+|\s+(?i:and|but|so|while)\s+(?=(?:I|we|he|she|they|my|our)\b)"
)

# who is said to stand somewhere now: I, we, he, she, they, or a name (an encoder's record
# names the speaker), never a thing ("it's now in your cart", "this is now at version 2")
_PERSON = (
    r"(?:\bI|\bwe|\bhe|\bshe|\bthey|(?-i:\b(?!(?:It|This|That|There|Here|Which|What|Everything"
    r"|Nothing|Something|Now|Then)\b)[A-Z][a-z]+))"
)
# where or what they stand in: a home, a job (not a task: "working on the API"), a thing
# they own or drive, a school
_JOB = r"(?:works?|working|employed) (?:at|for|as|from)"
_SCHOOL = r"(?:stud(?:y|ies|ying)|teach(?:es|ing)?) at"
_STANDING = rf"(?:in|based|lives?|living|{_JOB}|owns?|drives?|rents?|{_SCHOOL})"
# ... said of oneself before a "now" ("I live in Lisbon now", "now I work from home")
_HOLDS = rf"(?:live|living|{_JOB}|rent|renting|own|drive|driving|{_SCHOOL})"

# a statement that a state changed: a move, a switch, a new job or home, an end, or how one
# stands these days ("I'm now based in", "Ann now lives in", "I live in Lisbon now"); not a
# mere start or a joining, which a chat is full of ("started looking into it", "joined a
# group"), nor the "now" of a step ("now use the formula", "you now have a working route",
# "we are now at step 3")
_CHANGED = re.compile(
    r"\b(?:moved|relocated|switched|no longer|anymore|any more|instead of|gave up"
    r"|(?:started|took|got|accepted|landed|found|bought|rented) (?:a |an |my |our |the )?new"
    r"|(?:left|quit|changed|sold) (?:my|our|his|her|their)\b"
    r"|(?<!of )these days|nowadays"
    rf"|{_PERSON}(?:['’](?:m|re|s)| am| are| is)? now {_STANDING}\b"
    rf"|now,? (?:I|we) {_HOLDS}\b"
    rf"|(?:I|we)(?:['’](?:m|re)| am| are)? {_HOLDS}\b[^.!?,;:\n]{{0,40}}\bnow\b)",
    re.IGNORECASE,
)

# a change and the state it changes, when their words say so whatever the model reads of
# them: a move and where one lives, a new job and where one works ("I live in Lisbon" and "I
# moved to Berlin last week" read 0.38 with MiniLM, the two cities apart)
_OF_A_KIND = (
    (
        # one's own move ("we moved to", "I relocated back home"), not a thing's ("the
        # standup moved to 10am", "moved my files to a new folder") nor a tool's ("moved
        # from Slack to Teams")
        re.compile(
            r"\b(?:I|we)\s+(?:just\s+|recently\s+|finally\s+)?(?:moved|relocated)\s+"
            r"(?:back\s+|over\s+)?(?:to|into|out|home|abroad|away|house)\b",
            re.IGNORECASE,
        ),
        re.compile(
            r"\b(?:I|we)\s+(?:still\s+)?(?:live|am living|are living)\s+(?:in|at|near)\b"
            r"|\b(?:I['’]m|I am|we['’]re|we are)\s+based in\b",
            re.IGNORECASE,
        ),
    ),
    (
        re.compile(
            r"\b(?:I|we)\b[^.!?;]{0,30}\bnew (?:job|role|position)\b"
            r"|\b(?:I|we)\s+(?:left|quit|changed)\s+(?:my|our)\s+(?:job|role|position)\b",
            re.IGNORECASE,
        ),
        re.compile(rf"\b(?:I|we)\s+(?:still\s+)?{_JOB}\b", re.IGNORECASE),
    ),
)

# a question for a state as it stands: where one lives, which one uses, what it is now
# ("where do I live?", "what is my budget now?"); not what has come about ("what has she
# done", "how many have I sent"), which a change does not answer
_STATE_ASKED = re.compile(
    r"^\W*(?:where|which|what|who)\b(?:\s+\w+){0,3}?\s+(?:do|does|is|are|am)\b"
    r"|\b(?:now|currently|current|these days|at the moment|at present|any more|anymore)\b",
    re.IGNORECASE,
)
# "has ... done", "have I sent": a perfect, its participle regular or one of the common
# irregular ones
_HAS_COME_ABOUT = re.compile(
    r"\b(?:has|have|'ve)\s+(?:\w+\s+){0,3}?(?:\w{2,}ed|been|done|gone|made|seen|taken|given"
    r"|written|gotten|got|had|bought|brought|built|found|heard|kept|left|lost|met|paid|read"
    r"|sent|sold|spent|told|thought|won|become|begun|run|come)\b",
    re.IGNORECASE,
)


def asks_a_state(question: str) -> bool:
    """Whether `question` asks for a state as it stands (`_STATE_ASKED`), not for what has
    come about; the caller has read it as about the present."""
    return bool(_STATE_ASKED.search(question)) and not _HAS_COME_ABOUT.search(question)


Alike = Callable[[str, Sequence[str]], Sequence[float]]  # a text's cosine to each of others


def change_first(
    question: str,
    items: Sequence[EvidenceItem],
    when: Callable[[EvidenceItem], When | None],
    alike: Alike,
    head: int,
    replaces: Callable[[EvidenceItem, EvidenceItem], bool] | None = None,
) -> list[EvidenceItem]:
    """`items` with the stated change among the first `head` most like one of the first
    `CHANGE_HEAD` items, said after it, moved right above it (one move a request), unless a
    link says that item replaced the change (`replaces`: a value said again carries the date
    of its first saying). Like: the change's clause and the item's clause that answers
    `question`, by the model's cosine or by their words (a move and where one lives). For a
    question about the present only: the caller asks."""
    out = list(items)
    n = min(head, len(out))
    at = [when(i) for i in out[:n]]
    for p in range(min(CHANGE_HEAD, n)):
        mine = at[p]
        if mine is None:
            continue
        later = [
            (q, told)
            for q in range(p + 1, n)
            if (t := at[q]) is not None and said_after(t, mine)
            if (told := stated_change(out[q].text)) is not None
            if replaces is None or not replaces(out[p], out[q])
        ]
        if not later:
            continue
        own = clauses(out[p].text)
        if not own:
            continue
        answer = own[0] if len(own) == 1 else own[_argmax(alike(question, own))]
        cosines = alike(answer, [told for _, told in later])
        like = [
            i
            for i, (_, told) in enumerate(later)
            if cosines[i] >= MIN_ALIKE or _of_a_kind(answer, told)
        ]
        if like:
            best = max(like, key=cosines.__getitem__)
            out.insert(p, out.pop(later[best][0]))
            return out
    return out


def _of_a_kind(state: str, change: str) -> bool:
    """Whether `change` is a change of the state `state` says by their words (`_OF_A_KIND`)."""
    return any(c.search(change) and s.search(state) for c, s in _OF_A_KIND)


def clauses(text: str) -> list[str]:
    """The clauses an item opens with (`OPENING_WORDS`)."""
    opening = " ".join(text.split(" ")[:OPENING_WORDS])
    pieces = (c.strip() for c in _CLAUSE_BREAK.split(opening))
    return [c for c in pieces if len(c.split()) >= MIN_CLAUSE_WORDS]


def stated_change(text: str) -> str | None:
    """The clause of `text` that states a change (`_CHANGED`), or None when none does."""
    m = _CHANGED.search(text)
    if m is None:
        return None
    start = max((b.end() for b in _CLAUSE_BREAK.finditer(text, 0, m.start())), default=0)
    end = next((b.start() for b in _CLAUSE_BREAK.finditer(text, m.end())), len(text))
    return text[start:end].strip()


def _argmax(values: Sequence[float]) -> int:
    return max(range(len(values)), key=values.__getitem__)
