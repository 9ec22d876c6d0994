"""Dates in a sentence of the offline encoder, resolved against the session date.

Relative phrases ("yesterday", "last Friday", "two weeks ago", "next month") are rewritten
as the dates they mean; written dates ("8 May 2023", "March 2024") and days named without
their year ("June 2nd") stay as they are. The sentence's first date of any kind is its
`t_ref`, at the precision it was said (day, month or year).
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from functools import lru_cache

import dateparser

from workers.vocabulary import (
    MONTH_NUMBERS,
    MONTH_PATTERN,
    MONTHS,
    NUMBER_WORDS,
    WEEKDAYS,
    wordset,
)

_NUM = r"(?:\d{1,3}|" + "|".join(NUMBER_WORDS) + ")"
_RELATIVE = re.compile(
    r"\b(?:(?P<simple>yesterday|today|tonight|tomorrow|last night)"
    rf"|(?P<rel>last|this|next) (?P<what>{'|'.join(WEEKDAYS)}|week|month|year)"
    rf"|on (?P<on>{'|'.join(WEEKDAYS)})"
    rf"|(?P<ago>{_NUM}) (?P<ago_unit>day|week|month|year)s? ago"
    rf"|in (?P<inn>{_NUM}) (?P<in_unit>day|week|month|year)s?)\b",
    re.IGNORECASE,
)
_EXPLICIT = re.compile(
    r"\b(?:(?P<iso>\d{4}-\d{2}-\d{2})"
    rf"|(?P<d1>\d{{1,2}})(?:st|nd|rd|th)? (?P<m1>{MONTH_PATTERN}),? (?P<y1>\d{{4}})"
    rf"|(?P<m2>{MONTH_PATTERN}) (?P<d2>\d{{1,2}})(?:st|nd|rd|th)?,? (?P<y2>\d{{4}})"
    rf"|(?P<m3>{MONTH_PATTERN}),? (?P<y3>\d{{4}})"
    r"|(?:in|since|during|of) (?P<y4>(?:19|20)\d{2}))\b",
    re.IGNORECASE,
)
# "June 2nd", "the 8th of April": a day the speaker names without its year (capitalized
# month names only: "may" is also a verb)
_MONTH_NAME = "|".join([*MONTHS, *(m[:3] for m in MONTHS if len(m) > 3), "Sept"])
_YEARLESS = re.compile(
    rf"\b(?:(?P<m>{_MONTH_NAME})\.? (?P<d>\d{{1,2}})(?:st|nd|rd|th)?"
    rf"|(?P<d2>\d{{1,2}})(?:st|nd|rd|th)? (?:of )?(?P<m2>{_MONTH_NAME}))\b(?!\.?,? \d{{4}})"
)
_ON_A_WEEKDAY = rf"on\s+(?:{'|'.join(WEEKDAYS)})\b"
_PLANNED_ING = (
    "flying|leaving|going|coming|visiting|meeting|moving|starting|heading|driving|travell?ing"
    "|arriving|returning|hosting|presenting|seeing|playing"
)
# the words between: none that says what was done or since when
_NOTHING_PAST = (
    r"(?:(?!\b(?:since|after|from|ago|had|was|were|did|said|sent|told|happened)\b|\w+ed\b)"
    r"[^.!?;])*?"
)
_FUTURE = re.compile(
    r"\b(?:will|going to|gonna|plan(?:ning)? to)\b|['’]ll\b"
    # "the standup is on Monday": a day something is set for, ahead of when it is said
    rf"|\b(?:is|are|['’]s)\s+(?:\w+\s+)?{_ON_A_WEEKDAY}"
    # "I am flying to Lisbon on Sunday": a trip or a meeting under way for a day, with
    # nothing said done or of before on the way to it ("I'm having trouble since the crash
    # on Sunday", "she is recovering from the surgery she had on Tuesday" stay past)
    rf"|\b(?:am|are|is|['’]m|['’]re)\s+(?:{_PLANNED_ING})\b{_NOTHING_PAST}{_ON_A_WEEKDAY}"
    # "see you on Monday", "remind me on Friday", "let's meet on Saturday": a day asked for
    rf"|\b(?:see you|call me|text me|remind me|meet me|let['’]s meet|let us meet)"
    rf"\s+(?:\w+\s+){{0,2}}?{_ON_A_WEEKDAY}",
    re.IGNORECASE,
)
# A clause that tells what someone did: "in one week" there is how long it took ("I ate six
# in one week"), not a day ahead of when it is said. A verb in the past tense after a
# pronoun, or an irregular past form after anyone ("my sister ate"), or a deed said done
# (auxiliaries and reporting verbs left out: "I was told it ships in 3 days" looks ahead),
# unless the words before the phrase say what is set for then ("the race I entered is due
# in two weeks", "the parcel I ordered arrives in five days", "I booked a trip in two
# weeks", "I decided to quit in two weeks").
_IRREGULAR_PAST = (
    "ate|went|took|made|ran|saw|gave|found|bought|brought|wrote|spent|met|paid|sent|slept|"
    "spoke|drove|flew|drank|broke|chose|forgot|rode|sang|sold|threw|woke|wore|built|caught|"
    "fought|won(?!['’])|swam|taught|lost|did(?!n['’]t)"
)
_NOT_PAST = "need|feed|seed|speed|proceed|exceed|succeed|bleed|breed|embed"
_PAST = re.compile(
    r"\b(?:i|we|he|she|they|you)\s+(?:\w+ly\s+|just\s+|also\s+|only\s+|still\s+)?"
    rf"(?:(?!(?:{_NOT_PAST})\b)\w+ed)\b|\b(?:{_IRREGULAR_PAST})\b"
    r"|\b(?:was|were)\s+(?:done|finished|over)\b",
    re.IGNORECASE,
)
_SET_FOR = re.compile(
    r"(?:\b(?:is|are|am|be)|['’](?:s|re|m))\s+(?:\w+\s+){0,2}$"
    r"|\b(?:arrive|ship|start|begin|leave|open|end|close|launch|expire|depart|return|land|"
    r"happen|come)s?\s+(?:\w+\s+)?$"
    r"|\bto\s+\w+\s+(?:\w+\s+){0,3}$"
    r"|\b(?:booked|scheduled|reserved|registered|signed\s+up|planned|arranged|set\s+up)\b",
    re.IGNORECASE,
)
# where a clause ends: a mark (not a number's comma), or a conjunction before a new subject
_CLAUSE = re.compile(
    r"[;:]|(?<!\d),(?!\d)|\b(?:and|but|so|because|while|although)\b"
    r"(?=\s+(?:i|we|he|she|they|you|it|the|my|our|his|her|their)\b)",
    re.IGNORECASE,
)
# A word before the phrase that already says how the date relates ("since last week").
_PREPOSITIONS = wordset("since until till by before after from on in during of for around")


_DAY_AFTER = re.compile(
    rf",?\s+(?:the\s+)?(?:{MONTH_PATTERN}\s+\d{{1,2}}(?:st|nd|rd|th)?\b|\d{{1,2}}(?:st|nd|rd|th)?(?:\s+of)?\s+{MONTH_PATTERN})",
    re.IGNORECASE,
)


def _dated_weekday(m: re.Match[str], sentence: str) -> bool:
    """`on Sunday, June 2nd`: the weekday names a day the sentence dates itself."""
    weekday = m.group("on") or (m.group("what") or "").lower() in WEEKDAYS
    return bool(weekday) and bool(_DAY_AFTER.match(sentence, m.end()))


def _phrases(sentence: str) -> list[re.Match[str]]:
    """The relative phrases that date something: "in N days" not in a clause that tells what
    someone did (there it is how long it took), unless the sentence looks ahead."""
    ahead = bool(_FUTURE.search(sentence))
    return [
        m
        for m in _RELATIVE.finditer(sentence)
        if ahead or not (m.group("inn") and _took(m, sentence))
    ]


def _took(m: re.Match[str], sentence: str) -> bool:
    """Whether "in N days" says how long something took: its clause tells what someone did
    and says nothing set for then."""
    start = max((c.end() for c in _CLAUSE.finditer(sentence, 0, m.start())), default=0)
    end = next((c.start() for c in _CLAUSE.finditer(sentence, m.end())), len(sentence))
    before = sentence[start : m.start()]
    return bool(_PAST.search(sentence[start:end])) and not _SET_FOR.search(before)


def says_when(sentence: str) -> bool:
    """Whether the sentence dates something relative to when it is said ("next Friday"); the
    day it is said ("today") is every sentence's date, no news of its own."""
    return any(m.group().lower() not in ("today", "tonight") for m in _phrases(sentence))


def resolve_dates(sentence: str, base: datetime | None) -> tuple[str, str]:
    """Relative phrases rewritten against the session date; t_ref = the sentence's first date."""
    spans: list[tuple[int, int, str | None, str]] = []
    future = bool(_FUTURE.search(sentence))
    found = [
        (m, r)
        for m in _phrases(sentence)
        if base and not _dated_weekday(m, sentence) and (r := _relative(m, base, future))
    ]
    for m, (prefix, absolute, iso) in found:
        before = sentence[: m.start()].split()
        possessive = sentence[m.end() : m.end() + 2] in ("'s", "’s")  # "last Sunday's loaf"
        bare = possessive or (bool(before) and before[-1].lower() in _PREPOSITIONS)
        spans.append((m.start(), m.end(), absolute if bare else f"{prefix} {absolute}", iso))
    for m in _EXPLICIT.finditer(sentence):
        iso = _explicit(m)
        if iso and not any(s < m.end() and m.start() < e for s, e, _, _ in spans):
            spans.append((m.start(), m.end(), None, iso))
    for m in _YEARLESS.finditer(sentence):
        iso = _yearless(m, base)
        if iso and not any(s < m.end() and m.start() < e for s, e, _, _ in spans):
            spans.append((m.start(), m.end(), None, iso))
    spans.sort()
    out, pos = [], 0
    for start, end, replacement, _ in spans:
        out += [sentence[pos:start], sentence[start:end] if replacement is None else replacement]
        pos = end
    return "".join([*out, sentence[pos:]]), spans[0][3] if spans else ""


def _relative(m: re.Match[str], base: datetime, future_tense: bool) -> tuple[str, str, str] | None:
    """(preposition, absolute phrase, ISO date) of one relative phrase, via dateparser.

    Only "next"/"this"/"tomorrow"/"in N ..." look forward, and "on <weekday>" in a
    sentence in the future tense. Week phrases keep the day dateparser gives ("last week"
    = seven days back) and say "the week of": the schema has no week precision.
    """
    phrase, what = m.group().lower(), (m.group("what") or "").lower()
    unit, future, night = "day", False, phrase in ("tonight", "last night")
    if m.group("simple"):
        phrase = {"tonight": "today", "last night": "yesterday"}.get(phrase, phrase)
        future = phrase == "tomorrow"
    elif m.group("rel"):
        unit = what if what in ("week", "month", "year") else "day"
        future = m.group("rel").lower() != "last"
    elif m.group("on"):
        phrase, future = m.group("on").lower(), future_tense
    else:
        n, unit = m.group("ago") or m.group("inn"), (m.group("ago_unit") or m.group("in_unit"))
        unit, count, future = (
            unit.lower(),
            NUMBER_WORDS.get(n.lower()) or int(n),
            bool(m.group("inn")),
        )
        phrase = f"in {count} {unit}s" if future else f"{count} {unit}s ago"
    if m.group("rel") and m.group("rel").lower() == "next" and what in WEEKDAYS:
        found: date | None = _next_week(base.date(), WEEKDAYS.index(what))
    else:
        found = _parse(phrase, base.isoformat(), future)
    if found is None:
        return None
    month = f"{MONTHS[found.month - 1]} {found.year}"
    if unit == "year":
        return "in", str(found.year), f"{found.year:04d}"
    if unit == "month":
        return "in", month, f"{found.year:04d}-{found.month:02d}"
    day = f"{found.day} {month}"
    if unit == "week":
        return "during", f"the week of {day}", found.isoformat()
    return "on", f"the night of {day}" if night else day, found.isoformat()


def _next_week(base: date, weekday: int) -> date:
    """ "Next Friday": the Friday of the week after the one it is said in (Monday first), so
    never tomorrow when said on a Thursday; "this Friday" or "on Friday" is the coming one."""
    return base + timedelta(days=7 - base.weekday() + weekday)


@lru_cache(maxsize=4096)
def _parse(phrase: str, base_iso: str, future: bool) -> date | None:
    settings = {
        "RELATIVE_BASE": datetime.fromisoformat(base_iso),
        "PREFER_DATES_FROM": "future" if future else "past",
    }
    found = dateparser.parse(phrase, languages=["en"], settings=settings)
    return found.date() if isinstance(found, datetime) else None


def _explicit(m: re.Match[str]) -> str:
    """ISO form of a written date, or "" when it is not a real calendar date."""
    if m.group("y4"):
        return m.group("y4")
    try:
        if m.group("iso"):
            return date.fromisoformat(m.group("iso")).isoformat()
        name = (m.group("m1") or m.group("m2") or m.group("m3")).lower()[:3]
        month = MONTH_NUMBERS[name]
        year = int(m.group("y1") or m.group("y2") or m.group("y3"))
        day = m.group("d1") or m.group("d2")
        return date(year, month, int(day)).isoformat() if day else f"{year:04d}-{month:02d}"
    except ValueError:
        return ""


def _yearless(m: re.Match[str], base: datetime | None) -> str:
    """ISO form of a day named without its year: the one nearest the session date, the later
    on a tie ("June 2nd" said on 2 March 2024 is 2024-06-02); "" when no such day exists."""
    if base is None:
        return ""
    month = MONTH_NUMBERS[(m.group("m") or m.group("m2")).lower()[:3]]
    day = int(m.group("d") or m.group("d2"))
    found = []
    for year in (base.year - 1, base.year, base.year + 1):
        try:
            found.append(date(year, month, day))
        except ValueError:
            continue
    said = base.date()
    best = min(found, key=lambda d: (abs((d - said).days), d < said), default=None)
    return best.isoformat() if best else ""
