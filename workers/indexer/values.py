"""What a statement's values are and the words that name each (the value-change rule's
reading, `workers.indexer.supersession`): a number with its unit, an amount of money, a day
of a month or a time of day; the attribute's words around it, whose it is and the names
among them; whether the words before it say it changed, is a goal or the size of a change.

English function words only: no names, projects or topics.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from workers.vocabulary import MONTH_PATTERN, TAG_STOPWORDS, WEEKDAYS, month_number, wordset

WINDOW_BEFORE = 6  # words before a value that name its attribute
WINDOW_AFTER = 3
CHANGE_WORDS = 8  # how close before a value the word saying it changed must be

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
# a day of a month, either way round ("April 5th, 2024", "5 April 2024", the encoders' own
# form): one value, its year when it says one
_DAY = re.compile(
    rf"\b(?:({MONTH_PATTERN})\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(\d{{4}}))?"
    rf"|(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({MONTH_PATTERN})\b(?:,?\s+(\d{{4}}))?)",
    re.IGNORECASE,
)
# a time of day ("9:30", "10:00 am", "7 pm"): one value, in minutes after midnight
_TIME = re.compile(
    r"(?<![\d:])\b([01]?\d|2[0-3]):([0-5]\d)(?:\s?([ap])(?:\.m\.|m\b))?(?![\d:])"
    r"|\b(1[0-2]|0?\d)\s?([ap])(?:\.m\.|m\b)",
    re.IGNORECASE,
)
# ... and "3:16" is a time only said as one ("at 3:16", "3:16 pm"): a verse, a ratio else
_AT = re.compile(r"\b(?:at|by|until|till|from|to|around|before|after|since)\s+$", re.IGNORECASE)
_VERSION = re.compile(r"\bv?\d+\.\d+\.\d+|\bv\d+(?:\.\d+)?\b", re.IGNORECASE)
WORD = re.compile(r"[a-z][a-z0-9'’-]*")
# a later statement that reads as a change of what an earlier one said
_CHANGE = re.compile(
    r"\b(?:now|new|newly|updated?|changed?|increased?|decreased?|reduced|improved|grown|grew"
    r"|reached|raised|lowered|dropped|moved|switched|extended|revised|instead"
    r"|latest|rose|fell|up to|down to|bumped|adjusted|no longer|recently|updates"
    r"|slipped|postponed|pushed|rescheduled|delayed|brought forward|meant|corrections?"
    r"|upgraded|downgraded|ended up|cut|trimmed|slashed|halved|doubled|tripled|went up"
    r"|went down|back up|back down|shrank|shrunk)\b",
    re.IGNORECASE,
)
# a value someone means to reach, not one measured: "trying to get it to 200 ms"
_GOAL = re.compile(
    r"\b(?:try|trying|tries|want|wants|wanted|aim|aims|aiming|goal|goals|target|targets"
    r"|targeting|targeted|hope|hopes|hoping|plan|plans|planning|expect|expects|expecting"
    r"|would like|get (?:it|this|that) (?:down|up) to)\b",
    re.IGNORECASE,
)
# a statement that opens by correcting what was said: every value in it is a change
_CORRECTION = re.compile(r"\W*(?:corrections?|correcting|oops|sorry|actually)\b", re.IGNORECASE)
# "reduced it by 25%": the value that follows is how much it changed
_BY = re.compile(r"\bby\s*$", re.IGNORECASE)
# "from 64% to 71%", "from Postgres 15 to Postgres 16": the first value is what it was
_TO_NEXT = r"\s?(?:%|[a-z]+)?\s*(?:to|->|→)\s+(?:{name}\s+)?[$€£]?\d"
# "5 replicas instead of 3": the second value is what it was
_INSTEAD_OF = re.compile(
    r"\s?(?:%|[a-z]+)?,?\s*(?:instead of|rather than|in place of|up from|down from)\s+[$€£]?$",
    re.IGNORECASE,
)
_LAST_WORD = re.compile(r"([A-Za-z][\w-]*)\s+[$€£]?$")
# ... and a reason given after it ("since the new employer pays half"; "since March" is when)
CLAUSE_END = re.compile(
    r"[,;:.!?]|\b(?:but|so|because|and i|which)\b"
    r"|\bsince\s+(?=(?:the|a|an|my|our|their|his|her|its|we|i|he|she|they|it|you|there)\b)",
    re.IGNORECASE,
)
# "Ana's sister Eva's rent": whose it is; capitalized words that tell one thing from another
_OWNER = re.compile(r"\b(?:([\w-]+)['’]s|(my|our|your|his|her|their))\b", re.IGNORECASE)
_NAME = re.compile(r"\b[A-Z][\w-]+")
_FUNCTION = TAG_STOPWORDS | wordset(
    "the and for are was has had its our you i'm i've i'd we're we've can may might must "
    "any all each every one two per around about after before since over under into onto "
    "my me we us it is be to of in on at by an a or as so if do did done get got make made "
    "want need trying try help sure currently recently now new updated update actually "
    "already still yet never not no ever just able using use used instead rather went goes "
    "gone back"
)
_POSSESSIVE = wordset("my our your his her their its")
# a plan's verb before a day: "the launch is planned for June 3" is the launch's day
_PLANNED = wordset("planned scheduled set due expected slated booked supposed")
NOT_NAMES = _FUNCTION | frozenset(WEEKDAYS) | wordset("he she that what there here who let")


@dataclass(frozen=True)
class Value:
    kind: str
    # a date: month * 100 + day, plus year * 10,000 when it says its year; a time of day:
    # minutes after midnight
    amount: float
    attribute: frozenset[str]  # the words naming it, the namespace's common words left out
    shown: str
    changed: bool  # the words just before it say it changed ("now draws 650")
    goal: bool = False  # a value meant to be reached ("trying to get it to 200 ms")
    was: float | None = None  # "from 64% to 71%": 71's earlier value, 64
    stale: bool = False  # ... and 78 itself, no longer what holds
    delta: bool = False  # the size of a change ("reduced by 25%"), not a state
    whole: frozenset[str] = frozenset()  # the words naming it, common ones too
    whose: str = ""  # the last owner before it: "eva" in "Ana's sister Eva's rent", "my"
    names: frozenset[str] = frozenset()  # capitalized words naming it ("flight to Berlin")
    label: str = ""  # the name just before it ("Postgres 15"), lowercased
    head: str = ""  # the word it is the value of, right before it ("the budget is $40")
    modifier: str = ""  # ... and the word that qualifies that one ("travel budget")
    following: frozenset[str] = frozenset()  # the words after it ("$50 for the hosting")


def values_of(text: str, common: frozenset[str] = frozenset()) -> list[Value]:
    """The values a sentence gives and the words that name what each is the value of."""
    plain = _VERSION.sub(" ", text)  # a version names a thing, it is not its value
    out = []
    days = [(m, day) for m in _DAY.finditer(plain) if (day := _day(m)) is not None]
    for m, day in days:
        shown, changed = m.group(0).strip(), _changed_at(plain, m)
        out.append(Value("date", day, shown=shown, changed=changed, **_naming(plain, m, common)))
    for m, _ in reversed(days):
        plain = f"{plain[: m.start()]} {plain[m.end() :]}"
    times = [m for m in _TIME.finditer(plain) if _said_as_time(plain, m)]
    for m in times:
        shown, changed = m.group(0).strip(), _changed_at(plain, m)
        out.append(
            Value("time", _minutes(m), shown=shown, changed=changed, **_naming(plain, m, common))
        )
    for m in reversed(times):
        plain = f"{plain[: m.start()]} {plain[m.end() :]}"
    previous: tuple[re.Match[str], Value] | None = None
    for m in _VALUE.finditer(plain):
        currency, number, unit = m.group(1), m.group(2), (m.group(3) or "").lower()
        kind = "money" if currency else _kind(unit)
        if kind.startswith("count") and _looks_like_year(number):
            continue  # a date's year is when, not how much
        amount = float(number.replace(",", ""))  # "$45 a month" shows "$45"
        value = Value(
            kind,
            amount,
            shown=plain[m.start() : m.end() if unit not in _FUNCTION else m.end(2)].strip(),
            changed=_changed_at(plain, m),
            goal=bool(_GOAL.search(clause_before(plain, m))),
            delta=bool(_BY.search(plain[: m.start()])),
            label=_label(plain, m),
            # a function word after the number is no unit: the clause it opens follows
            **_naming(plain, m, common, m.end() if unit not in _FUNCTION else m.end(2)),
        )
        if previous is not None and _to_next(plain, previous[0], previous[1].label):
            was = previous[1]  # "from <was> to <value>": one change of one thing
            if comparable(was, value) or was.kind == "count":
                out[-1] = replace(was, stale=True)
                value = replace(value, was=was.amount)
        elif previous is not None and _INSTEAD_OF.match(plain[previous[0].end(2) : m.start()]):
            now = previous[1]  # "<now> instead of <value>": the same change, the other way round
            if comparable(now, value) or value.kind == "count":
                out[-1] = replace(now, was=value.amount)
                value = replace(value, stale=True)
        out.append(value)
        previous = (m, value)
    return out


NEAR = 40  # characters before a value read for the word just before it


def _said_as_time(text: str, m: re.Match[str]) -> bool:
    """A clock time: two hour digits, "am"/"pm", or a word before it that says when."""
    if m.group(4) or m.group(3) or len(m.group(1)) == 2:
        return True
    return bool(_AT.search(text[max(0, m.start() - NEAR) : m.start()]))


def _label(text: str, m: re.Match[str]) -> str:
    """The name just before a value, lowercased ("Postgres 15": "postgres"); "" when the
    word there is not a name."""
    found = _LAST_WORD.search(text[max(0, m.start() - NEAR) : m.start()])
    if found is None or not found.group(1)[0].isupper():
        return ""
    word = found.group(1).lower()
    return "" if word in NOT_NAMES or month_number(word) else word


def _to_next(text: str, m: re.Match[str], label: str) -> bool:
    """Whether the value at `m` is what the next one replaced ("from 64% to 71%"), the
    same name before both ("from Postgres 15 to Postgres 16")."""
    name = re.escape(label) if label else "(?!)"
    return bool(re.compile(_TO_NEXT.format(name=name), re.IGNORECASE).match(text, m.end(2)))


def _minutes(m: re.Match[str]) -> float:
    """A time of day in minutes after midnight ("7 pm": 1140, "9:30": 570)."""
    hour = int(m.group(1) or m.group(4))
    minute = int(m.group(2) or 0)
    half = (m.group(3) or m.group(5) or "").lower()
    if half == "p" and hour < 12:
        hour += 12
    elif half == "a" and hour == 12:
        hour = 0
    return float(hour * 60 + minute)


def _day(m: re.Match[str]) -> float | None:
    """A date's value; None for "2 may" that is no date (a day first needs a capital month)."""
    if m.group(1):
        month, day, year = m.group(1), m.group(2), m.group(3)
    elif m.group(5)[0].isupper():
        month, day, year = m.group(5), m.group(4), m.group(6)
    else:
        return None
    md = (month_number(month.rstrip(".")) or 0) * 100 + int(day)
    return float(int(year) * 10_000 + md if year else md)


def _naming(
    text: str, m: re.Match[str], common: frozenset[str], end: int | None = None
) -> dict[str, Any]:
    """What names the value at `m` (ending at `end`, default the match's): its attribute's
    words, without and with the namespace's common ones, the owner the words before it
    give, and the capitalized words among them."""
    after = _after(text, m.end() if end is None else end)
    following = _following(after)
    whole = _attribute(text[: m.start()], following)
    before = clause_before(text, m).split()
    near = " ".join(before[-WINDOW_BEFORE - 2 :])
    owners = [o or mine for o, mine in _OWNER.findall(near) if mine or o.lower() not in NOT_NAMES]
    shown = _NAME.findall(" ".join([*before[-WINDOW_BEFORE:], after]))
    # the speaker's name and the project, common in the namespace, tell nothing apart
    names = {stem(n.lower()) for n in shown if n.lower() not in NOT_NAMES} - common
    names -= {n for n in names if month_number(n)}
    return {
        "attribute": whole - common,
        "whole": whole,
        "whose": owners[-1].lower() if owners else "",
        "names": frozenset(names),
        "following": frozenset(following),
        **_head(" ".join(before)),
    }


def _head(clause: str) -> dict[str, str]:
    """What the value is of: the last content word of the clause before it (a plan's verb
    aside: "the launch is planned for"), and the content word right before that one that
    qualifies it ("travel budget"; not an owner's: "Ana's budget")."""
    words = WORD.findall(_CHANGE.sub(" ", clause).lower().replace("’", "'"))
    kept = [i for i, w in enumerate(words) if content([w]) and w not in _PLANNED]
    if not kept:
        return {}
    at = kept[-1]
    before = words[at - 1] if at > 0 else ""
    owned = before.endswith("'s") or before in _POSSESSIVE
    return {"head": stem(words[at]), "modifier": "" if owned else "".join(content([before]))}


def clause_before(text: str, m: re.Match[str]) -> str:
    return CLAUSE_END.split(text[: m.start()])[-1]


def _changed_at(text: str, m: re.Match[str]) -> bool:
    """A change word among the `CHANGE_WORDS` words before the value, in its clause, or a
    statement that opens as a correction ("Correction: ...", "Sorry, Ana meant ...")."""
    clause = clause_before(text, m)
    return bool(_CHANGE.search(" ".join(clause.split()[-CHANGE_WORDS:]))) or bool(
        _CORRECTION.match(text)
    )


def _kind(unit: str) -> str:
    """`percent`, `duration:ms`, ...; a number followed by another word counts that word
    ("8 hives": `count:hive`), so that eight hives and 120 jars are not one attribute."""
    if unit in _UNITS:
        kind, canonical = _UNITS[unit]
        return f"{kind}:{canonical}"
    if unit and unit not in _FUNCTION and unit.isalpha():
        return f"count:{stem(unit)}"
    return "count"


# words that name one attribute of a day: "the thesis is due on May 3" is its deadline
_ALIKE = {"due": "deadline"}


def _attribute(before: str, following: list[str]) -> frozenset[str]:
    """The content words just before a value and those after it up to its clause's end
    (`_following`); change words ("improved to") say that it changed, not what."""
    words = content(WORD.findall(_CHANGE.sub(" ", before).lower()))[-WINDOW_BEFORE:]
    return frozenset(_ALIKE.get(w, w) for w in [*words, *following])


def as_said(word: str, *texts: str) -> str:
    """An attribute's word as the first of `texts` that has it says it ("thesis" for
    "thesi"), else as it is."""
    for text in texts:
        for said in WORD.findall(text.lower()):
            if stem(said) == word:
                return str(said).replace("’", "'").removesuffix("'s")
    return word


def _following(after: str) -> list[str]:
    """The content words after a value, to its clause's end (`_after`)."""
    return content(WORD.findall(_CHANGE.sub(" ", after).lower()))[:WINDOW_AFTER]


def _after(text: str, end: int) -> str:
    """What follows a value, to its clause's end."""
    return CLAUSE_END.split(text[end:].lstrip(" ,;"), maxsplit=1)[0]


def _looks_like_year(number: str) -> bool:
    return len(number) == 4 and number.isdigit() and 1900 <= int(number) <= 2100


def content(words: Iterable[str]) -> list[str]:
    return [stem(w) for w in words if len(w) >= 3 and w not in _FUNCTION and not w.isdigit()]


def stem(word: str) -> str:
    word = word.replace("’", "'").removesuffix("'s")
    if len(word) > 5 and word.endswith(("ches", "shes", "xes", "sses")):
        return word[:-2]
    return word[:-1] if len(word) > 4 and word.endswith("s") and not word.endswith("ss") else word


def attribute_overlap(a: Value, b: Value) -> int:
    """How many words name both values. The namespace's common words (the speaker's name,
    the project) do not tell one attribute from another, so they count only when the rest
    of both attributes is the same: "Ana's body weight" stated ten times is one attribute
    however common its words have become, and "Ana's project costs ... for hosting" and
    "... for the domain" are two. Nor does an owner's name name what is owned ("Ann's budget
    for the kitchen", "Ann's budget for the shed": whose it is, `same_thing` reads)."""
    if a.attribute == b.attribute:
        return len(a.whole & b.whole)
    return len(a.attribute & b.attribute - {a.whose, b.whose})


def same_thing(a: Value, b: Value) -> bool:
    """Not two owners ("Ana's rent", "Ana's sister's rent") nor two names on either side
    ("flight to Berlin", "flight to Tokyo"): values of things worded alike."""
    if a.whose and b.whose and a.whose != b.whose:
        return False
    return not (a.names - b.names and b.names - a.names)


def same_amount(a: Value, b: Value) -> bool:
    """One value; a date that does not say its year is the same day in any year."""
    if a.kind == "date" and min(a.amount, b.amount) < 10_000:
        return a.amount % 10_000 == b.amount % 10_000
    return a.amount == b.amount


def comparable(a: Value, b: Value) -> bool:
    """One kind and unit; a bare number ("the hives now number 12") compares with a count
    of what its own words name ("8 hives")."""
    if a.kind == b.kind:
        return True
    for bare, counted in ((a, b), (b, a)):
        if bare.kind == "count" and counted.kind.startswith("count:"):
            return counted.kind.removeprefix("count:") in bare.attribute
    return False
