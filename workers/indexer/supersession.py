"""The offline rules that find which record supersedes or contradicts which (no LLM).

Two rules, both over the records of one namespace said by the same side (user or
assistant), in the order they were said:

- `value-change`: a later statement gives the same attribute a different value. The
  attribute is what the words around a value name ("the greenhouse heater draws ... 650
  watts"): two statements share it when at least `MIN_SHARED` of those words agree and the
  values are of one kind and unit (a percentage, a duration, an amount of money, a count
  of one thing, a day). The later value must also read as a change: a word such as
  "now", "new", "updated", "increased" just before it, in its clause; anything less sure
  links nothing. A goal ("trying to reach 100 %") is not a measured value, so the two
  never replace each other (dates excepted: a deadline is a plan either way). In "from X
  to Y" only Y holds; a later "from X to Y" replaces an earlier value only when X is that
  value, else it is the change of another thing worded alike. An assistant's numbers are
  worked examples and suggestions, not the state of things: only the other side's count.
- `never-but-did`: a statement that something was never done ("I've never written any
  routes") against one that says it was. When the account of doing it is later, it
  settles the question (it supersedes the denial); when only earlier ones exist, the two
  cannot both hold and nothing settles them: a conflict. An account counts only when it
  states what happened: a statement asking, trying, wanting or having trouble ("trying
  to deploy it", "can you help me test it") is not having done it, and a long message (a
  pasted request that says everything at once) is read by neither side.

The rules know English function words only: no names, projects or topics.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from schemas.supersession import LinkKind, Supersession
from workers.vocabulary import MONTH_PATTERN, TAG_STOPWORDS, month_number, wordset

MIN_SHARED = 2  # attribute words two values must share to name the same thing
WINDOW_BEFORE = 6  # words before a value that name its attribute
WINDOW_AFTER = 3
CHANGE_WORDS = 8  # how close before a value the word saying it changed must be
MAX_DENIAL_CHARS = 600  # a longer record is a pasted request: no denial or account read in it
MAX_LINKS_PER_STATEMENT = 2  # denials: the best-matching accounts only
COMMON_SHARE = 0.1  # a word in more of the namespace's statements than this names no attribute
COMMON_MIN = 5  # ... and in more than this many

# a unit as written -> (kind, canonical unit): two values compare only in one unit
_UNITS = {
    "%": ("percent", "%"),
    "percent": ("percent", "%"),
    "ms": ("duration", "ms"),
    "milliseconds": ("duration", "ms"),
    "s": ("duration", "s"),
    "sec": ("duration", "s"),
    "seconds": ("duration", "s"),
    "minutes": ("duration", "min"),
    "mins": ("duration", "min"),
    "hours": ("duration", "h"),
    "days": ("duration", "d"),
    "weeks": ("duration", "w"),
    "months": ("duration", "mo"),
    "years": ("duration", "y"),
    "kb": ("size", "kb"),
    "mb": ("size", "mb"),
    "gb": ("size", "gb"),
    "tb": ("size", "tb"),
    "px": ("pixels", "px"),
}
_VALUE = re.compile(
    r"(?<![\w.$€£-])([$€£])?(\d+(?:,\d{3})*(?:\.\d+)?)(?:\s?(%|[a-z]+\b))?(?![.]?\d|-|/)",
    re.IGNORECASE,
)
# a day of a month ("April 5", "April 5th, 2024"): one value, the month and day
_DAY = re.compile(
    rf"\b({MONTH_PATTERN})\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+\d{{4}})?", re.IGNORECASE
)
_VERSION = re.compile(r"\bv?\d+\.\d+\.\d+|\bv\d+(?:\.\d+)?\b", re.IGNORECASE)
_WORD = re.compile(r"[a-z][a-z0-9'’-]*")
# a later statement that reads as a change of what an earlier one said
_CHANGE = re.compile(
    r"\b(?:now|new|newly|updated?|changed?|increased?|decreased?|reduced|improved|grown|grew"
    r"|reached|raised|lowered|dropped|moved|switched|extended|revised|instead"
    r"|latest|rose|fell|up to|down to|bumped|adjusted|no longer|recently|updates)\b",
    re.IGNORECASE,
)
# "X has never done Y" (encoders write the speaker's name for "I"), "X hasn't ever done Y"
_NEVER = re.compile(
    r"\b(?:has|have|had|'ve|’ve)\s+(?:actually\s+|really\s+)?never\b"
    r"|\b(?:has|have|did)(?:\s+not|n't|n’t)\s+(?:ever|yet|actually)\b",
    re.IGNORECASE,
)
# a value someone means to reach, not one measured: "trying to get it to 200 ms"
_GOAL = re.compile(
    r"\b(?:try|trying|tries|want|wants|wanted|aim|aims|aiming|goal|goals|target|targets"
    r"|targeting|targeted|hope|hopes|hoping|plan|plans|planning|expect|expects|expecting"
    r"|would like|get (?:it|this|that) (?:down|up) to)\b",
    re.IGNORECASE,
)
# "reduced it by 25%": the value that follows is how much it changed
_BY = re.compile(r"\bby\s*$", re.IGNORECASE)
# "from 78% to 88%": the first value is what it was
_TO_NEXT = re.compile(r"\s?(?:%|[a-z]+)?\s*(?:to|->|→)\s+[$€£]?\d", re.IGNORECASE)
# a clause that asks, tries or wants rather than tells what happened
_NOT_DONE = re.compile(
    r"\?|\b(?:try|trying|tries|help|helps|can you|could you|would|wondering|wonder|want|wants"
    r"|wanted|not sure|trouble|struggling|confused|how|let's|let us|will|going to|plan"
    r"|planning|should|need|needs|if|whether|hope|hoping|what|which|torn|considering"
    r"|unsure|stuck)\b",
    re.IGNORECASE,
)
_CLAUSE_END = re.compile(r"[,;:.!?]|\b(?:but|so|because|and i|which)\b", re.IGNORECASE)
_FUNCTION = TAG_STOPWORDS | wordset(
    "the and for are was has had its our you i'm i've i'd we're we've can may might must "
    "any all each every one two per around about after before since over under into onto "
    "my me we us it is be to of in on at by an a or as so if do did done get got make made "
    "want need trying try help sure currently recently now new updated update actually "
    "already still yet never not no ever just able using use used"
)


@dataclass(frozen=True)
class Statement:
    """What the rules read of one record: its words, who said it, and when (an order key
    that is comparable only between statements the rules may call earlier and later)."""

    record_id: str
    text: str
    role: str
    session_id: str
    said_at: datetime | None  # the conversation date
    position: tuple[int, int]  # (segment index, exchange seq) within its session


def link_statements(
    namespace: str, statements: Sequence[Statement], common: frozenset[str] | None = None
) -> list[Supersession]:
    """Every link the rules are sure of among `statements` (one namespace); `common`: the
    namespace's words too frequent to name an attribute (else read from `statements`)."""
    if common is None:
        common = common_words([s.text for s in statements])
    links: dict[tuple[LinkKind, str, str], Supersession] = {}
    found = [
        *_value_changes(namespace, statements, common),
        *_denials(namespace, statements, common),
    ]
    for link in found:
        links.setdefault((link.kind, link.older_id, link.newer_id), link)
    return list(links.values())


def common_words(texts: Sequence[str]) -> frozenset[str]:
    """Words too frequent among a namespace's statements to tell one attribute from another:
    the speaker's name that an encoder writes for "I", the project everything is about."""
    df: dict[str, int] = {}
    for text in texts:
        for w in set(_content(_WORD.findall(text.lower()))):
            df[w] = df.get(w, 0) + 1
    cut = max(COMMON_MIN, COMMON_SHARE * len(texts))
    return frozenset(w for w, n in df.items() if n > cut)


def earlier(a: Statement, b: Statement) -> bool | None:
    """Whether `a` was said before `b`; None when the order is not known for sure (no dates,
    or two sessions of one date)."""
    if a.session_id == b.session_id:
        if a.position == b.position:
            return None
        return a.position < b.position
    if a.said_at is None or b.said_at is None or a.said_at == b.said_at:
        return None
    return a.said_at < b.said_at


# -- value-change -------------------------------------------------------------------------


@dataclass(frozen=True)
class _Value:
    kind: str
    amount: float
    attribute: frozenset[str]
    shown: str
    changed: bool  # the words just before it say it changed ("now draws 650")
    goal: bool = False  # a value meant to be reached ("trying to get it to 200 ms")
    was: float | None = None  # "from 78% to 88%": 88's earlier value, 78
    stale: bool = False  # ... and 78 itself, no longer what holds
    delta: bool = False  # the size of a change ("reduced by 25%"), not a state


def values_of(text: str, common: frozenset[str] = frozenset()) -> list[_Value]:
    """The values a sentence gives and the words that name what each is the value of."""
    plain = _VERSION.sub(" ", text)  # a version names a thing, it is not its value
    out = []
    for m in _DAY.finditer(plain):
        month = month_number(m.group(1).rstrip(".")) or 0
        attribute = _attribute(plain, m.start(), m.end()) - common
        day = float(month * 100 + int(m.group(2)))
        out.append(_Value("date", day, attribute, m.group(0).strip(), _changed_at(plain, m)))
    plain = _DAY.sub(" ", plain)
    previous: tuple[re.Match[str], _Value] | None = None
    for m in _VALUE.finditer(plain):
        currency, number, unit = m.group(1), m.group(2), (m.group(3) or "").lower()
        kind = "money" if currency else _kind(unit)
        if kind.startswith("count") and _looks_like_year(number):
            continue  # a date's year is when, not how much
        attribute = _attribute(plain, m.start(), m.end()) - common
        amount = float(number.replace(",", ""))
        value = _Value(
            kind,
            amount,
            attribute,
            m.group(0).strip(),
            _changed_at(plain, m),
            goal=bool(_GOAL.search(_clause_before(plain, m))),
            delta=bool(_BY.search(plain[: m.start()])),
        )
        if previous is not None and _TO_NEXT.match(plain, previous[0].end(2)):
            was = previous[1]  # "from <was> to <value>": one change of one thing
            if _comparable(was, value) or was.kind == "count":
                out[-1] = replace(was, stale=True)
                value = replace(value, was=was.amount)
        out.append(value)
        previous = (m, value)
    return out


def _clause_before(text: str, m: re.Match[str]) -> str:
    return _CLAUSE_END.split(text[: m.start()])[-1]


def _changed_at(text: str, m: re.Match[str]) -> bool:
    """A change word among the `CHANGE_WORDS` words before the value, in its clause."""
    clause = _clause_before(text, m)
    return bool(_CHANGE.search(" ".join(clause.split()[-CHANGE_WORDS:])))


def _kind(unit: str) -> str:
    """`percent`, `duration:ms`, ...; a number followed by another word counts that word
    ("8 hives": `count:hive`), so that eight hives and 120 jars are not one attribute."""
    if unit in _UNITS:
        kind, canonical = _UNITS[unit]
        return f"{kind}:{canonical}"
    if unit and unit not in _FUNCTION and unit.isalpha():
        return f"count:{_stem(unit)}"
    return "count"


def _attribute(text: str, start: int, end: int) -> frozenset[str]:
    """The content words just before a value and those after it up to its clause's end;
    change words ("improved to") say that it changed, not what."""
    before = _content(_WORD.findall(_CHANGE.sub(" ", text[:start]).lower()))[-WINDOW_BEFORE:]
    rest = _CHANGE.sub(" ", text[end:]).lower().lstrip(" ,;")
    after = _content(_WORD.findall(_CLAUSE_END.split(rest, maxsplit=1)[0]))[:WINDOW_AFTER]
    return frozenset([*before, *after])


def _looks_like_year(number: str) -> bool:
    return len(number) == 4 and number.isdigit() and 1900 <= int(number) <= 2100


def _content(words: Iterable[str]) -> list[str]:
    return [_stem(w) for w in words if len(w) >= 3 and w not in _FUNCTION and not w.isdigit()]


def _stem(word: str) -> str:
    word = word.replace("’", "'").removesuffix("'s")
    if len(word) > 5 and word.endswith(("ches", "shes", "xes", "sses")):
        return word[:-2]
    return word[:-1] if len(word) > 4 and word.endswith("s") and not word.endswith("ss") else word


def _value_changes(
    namespace: str, statements: Sequence[Statement], common: frozenset[str]
) -> list[Supersession]:
    # an assistant's numbers are worked examples and suggestions, not the state of things
    said = [s for s in statements if s.role != "assistant"]
    valued = [(s, values_of(s.text, common)) for s in said]
    valued = [(s, vs) for s, vs in valued if vs]
    by_word: dict[tuple[str, str], list[int]] = {}
    for i, (s, vs) in enumerate(valued):
        for v in vs:
            for w in v.attribute:
                by_word.setdefault((s.role, w), []).append(i)
    out = []
    for j, (newer, new_values) in enumerate(valued):
        best: tuple[int, tuple[int, int], Statement, _Value, _Value] | None = None
        candidates = {i for v in new_values for w in v.attribute for i in by_word[(newer.role, w)]}
        for i in candidates - {j}:
            older, old_values = valued[i]
            if earlier(older, newer) is not True:
                continue
            for nv in new_values:
                for ov in old_values:
                    shared = len(nv.attribute & ov.attribute)
                    if not _changed(older, newer, ov, nv, shared, old_values):
                        continue
                    if best is None or (shared, _order(older)) > (best[0], best[1]):
                        best = (shared, _order(older), older, ov, nv)
        if best is not None:
            _, _, older, ov, nv = best
            words = ", ".join(sorted(ov.attribute & nv.attribute))
            out.append(
                Supersession(
                    namespace=namespace,
                    kind=LinkKind.supersedes,
                    older_id=older.record_id,
                    newer_id=newer.record_id,
                    changed_at=newer.said_at,
                    reason=f"{words}: {ov.shown} then {nv.shown}"[:300],
                    found_by="rule:value-change",
                )
            )
    return out


def _comparable(a: _Value, b: _Value) -> bool:
    """One kind and unit; a bare number ("the hives now number 12") compares with a count
    of what its own words name ("8 hives")."""
    if a.kind == b.kind:
        return True
    for bare, counted in ((a, b), (b, a)):
        if bare.kind == "count" and counted.kind.startswith("count:"):
            return counted.kind.removeprefix("count:") in bare.attribute
    return False


def _order(s: Statement) -> tuple[int, int]:
    """A sortable reading of when `s` was said, for picking the latest of several olders."""
    day = int(s.said_at.timestamp()) if s.said_at is not None else 0
    return (day, s.position[0] * 1_000_000 + s.position[1])


def _changed(
    older: Statement,
    newer: Statement,
    ov: _Value,
    nv: _Value,
    shared: int,
    old_values: Sequence[_Value],
) -> bool:
    """The newer value replaces the older one: same kind, another amount the older statement
    never gave, the same attribute, and a later statement that reads as a change. Both
    measured or both meant (a date is either), and when the newer one says what it was,
    it was the older value."""
    if not _comparable(ov, nv) or ov.amount == nv.amount or shared < MIN_SHARED:
        return False
    if ov.stale or nv.stale or ov.delta or nv.delta:
        return False  # replaced in its own sentence ("from 78% to"); a change's size ("by 25%")
    if ov.goal != nv.goal and nv.kind != "date":
        return False  # a goal against a reading
    if nv.was is not None and nv.was != ov.amount:
        return False  # a change from another value: another thing worded alike
    if any(v.amount == nv.amount and _comparable(v, nv) for v in old_values):
        return False  # the older one already knew this value: a restatement, not a change
    return nv.changed or nv.was is not None


# -- never-but-did --------------------------------------------------------------------------


def denied(text: str, common: frozenset[str] = frozenset()) -> frozenset[str] | None:
    """What a statement says was never done (its content words to the clause's end), or None
    when it denies nothing."""
    m = _NEVER.search(text)
    if m is None:
        return None
    rest = _CLAUSE_END.split(text[m.end() :], maxsplit=1)[0]
    words = frozenset(_content(_WORD.findall(rest.lower()))) - common
    return words if len(words) >= MIN_SHARED else None


def told(text: str) -> frozenset[str]:
    """The content words of a statement that tells what happened; none when it asks, tries,
    wants, weighs or has trouble anywhere ("can you help me deploy it" is not having
    deployed it, and such a message's other clauses are background to the request)."""
    if _NOT_DONE.search(text):
        return frozenset()
    return frozenset(_content(_WORD.findall(text.lower())))


def _denials(
    namespace: str, statements: Sequence[Statement], common: frozenset[str]
) -> list[Supersession]:
    short = [len(s.text) <= MAX_DENIAL_CHARS for s in statements]
    words = [told(s.text) if ok else frozenset() for s, ok in zip(statements, short, strict=True)]
    out: list[Supersession] = []
    for j, denial in enumerate(statements):
        what = denied(denial.text, common) if short[j] else None
        if what is None:
            continue
        accounts = [
            (len(what & words[i]), i)
            for i, s in enumerate(statements)
            if i != j
            and s.role == denial.role
            and not _NEVER.search(s.text)
            and len(what & words[i]) >= MIN_SHARED
        ]
        later = [i for _, i in accounts if earlier(denial, statements[i]) is True]
        before = [(n, i) for n, i in accounts if earlier(statements[i], denial) is True]
        if later:  # done since: the latest account settles it
            settled = max(later, key=lambda i: _order(statements[i]))
            out.append(_denial_link(namespace, denial, statements[settled], what, settles=True))
            continue
        for _, i in sorted(before, key=lambda x: (x[0], _order(statements[x[1]])), reverse=True)[
            :MAX_LINKS_PER_STATEMENT
        ]:
            out.append(_denial_link(namespace, statements[i], denial, what, settles=False))
    return out


def _denial_link(
    namespace: str, older: Statement, newer: Statement, what: frozenset[str], settles: bool
) -> Supersession:
    said = ", ".join(sorted(what))
    return Supersession(
        namespace=namespace,
        kind=LinkKind.supersedes if settles else LinkKind.conflict,
        older_id=older.record_id,
        newer_id=newer.record_id,
        changed_at=newer.said_at,
        reason=(
            f"said never done ({said}), then done" if settles else f"done, then said never ({said})"
        )[:300],
        found_by="rule:never-but-did",
    )
