"""A stated change first: for a question about the present, a later statement that something
changed ("we just moved to Lisbon", "I left and started a new job") or that says how things
stand now ("I'm in Lisbon these days", "we now live in Lisbon") moves right above an
earlier statement of the reply's first items that it is like, without a link.

The offline rules link values only (numbers, amounts, days), so a move, a job or a tool that
changes reaches the reply as two statements in retrieval's order, and the earlier one often
leads: it names what the question asks about ("where do I live" finds "I live in Porto"
before "we moved to Lisbon"). Word overlap cannot tell that the two speak of one thing, so
their vectors do: the model's cosine of the two texts at least `MIN_ALIKE` (unrelated
statements of one person, "I work at a bank" beside "I switched editors", read 0.2-0.35;
a move beside where one lived, a new job beside the old one, 0.45-0.6, with MiniLM). A
reorder inside the first items: what the reply holds does not change, only which comes
first.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from schemas import EvidenceItem
from workers.store.segments import When, said_after

CHANGE_HEAD = 3  # the first items a stated change can move above: what an answer reads first
MIN_ALIKE = 0.4  # cosine of two statements about one thing (module docstring)

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
    items: Sequence[EvidenceItem],
    when: Callable[[EvidenceItem], When | None],
    alike: Alike,
    head: int,
    replaces: Callable[[EvidenceItem, EvidenceItem], bool] | None = None,
) -> list[EvidenceItem]:
    """`items` with the first stated change among the first `head` said after one of the
    first `CHANGE_HEAD` items and like it moved right above it (one move a request), unless
    a link says that item replaced the change (`replaces`: a value said again carries the
    date of its first saying). For a question about the present only: the caller asks."""
    out = list(items)
    n = min(head, len(out))
    at = [when(i) for i in out[:n]]
    for p in range(min(CHANGE_HEAD, n)):
        mine = at[p]
        if mine is None:
            continue
        later = [
            q
            for q in range(p + 1, n)
            if (t := at[q]) is not None and said_after(t, mine) and _CHANGED.search(out[q].text)
            if replaces is None or not replaces(out[p], out[q])
        ]
        if not later:
            continue
        cosines = alike(out[p].text, [out[q].text for q in later])
        q = next((q for q, c in zip(later, cosines, strict=True) if c >= MIN_ALIKE), None)
        if q is not None:
            out.insert(p, out.pop(q))
            return out
    return out
