"""Explicit dates in a question and the temporal filter they make (DESIGN §8.2).

Only concrete dates count ("in May 2023", "on 8 May 2023", "between March and June 2023",
"before 2023-05-08"); vague wording ("recently", "last week") makes no filter.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta
from typing import cast

from pydantic import ValidationError

from schemas.plan import TemporalFilter, date_bounds
from workers.vocabulary import MONTH_PATTERN, NUMBER_WORDS, WEEKDAYS, month_number

_MONTH = MONTH_PATTERN
MONTH_WORD = re.compile(rf"\b{_MONTH}(?!\w)", re.IGNORECASE)
_ORD = r"(?:st|nd|rd|th)?"
DATE = re.compile(
    rf"\b(?:(?P<iy>\d{{4}})[-/](?P<im>\d{{1,2}})(?:[-/](?P<id>\d{{1,2}}))?(?![\d-])"
    rf"|(?P<d1>\d{{1,2}}){_ORD}\s+(?:of\s+)?(?P<m1>{_MONTH}),?\s+(?P<y1>\d{{4}})"
    rf"|(?P<m2>{_MONTH})\s+(?P<d2>\d{{1,2}}){_ORD},?\s+(?P<y2>\d{{4}})"
    rf"|(?P<m3>{_MONTH}),?\s+(?:of\s+)?(?P<y3>\d{{4}})"
    rf"|(?P<y4>(?:19|20)\d{{2}}))\b",
    re.IGNORECASE,
)
_PARTIAL = re.compile(
    rf"(?:(?P<d1>\d{{1,2}}){_ORD}\s+(?:of\s+)?(?P<m1>{_MONTH})|(?P<m2>{_MONTH})\s+(?P<d2>\d{{1,2}}){_ORD}"
    rf"|(?P<m3>{_MONTH})|(?P<d4>\d{{1,2}}){_ORD}),?",
    re.IGNORECASE,
)
_RANGE_HEAD = re.compile(
    r"\b(?:between|from)\s+(?P<left>[\w ,./-]{1,40}?)\s*(?:and|to|until|till|through|-|–)\s*$",
    re.IGNORECASE,
)
_YEAR_CUE = re.compile(
    r"\b(?:in|during|of|since|before|after|until|till|by|from|around|year)\s+$", re.IGNORECASE
)
_UNIT_DAYS = {"day": 1, "night": 1, "morning": 1, "evening": 1, "afternoon": 1, "week": 7}
_UNIT_DAYS |= {"weekend": 7, "fortnight": 14, "month": 31, "year": 366}
_UNIT_DAYS |= dict.fromkeys(WEEKDAYS, 7)
# "the week before 16 August 2023", "two days after 5 May 2023": a span on one side of a day
_SPAN_CUE = re.compile(
    rf"\b(?:(?P<n>\d{{1,2}}|{'|'.join(NUMBER_WORDS)})\s+)?(?:the\s+|last\s+|next\s+)?"
    rf"(?P<unit>{'|'.join(_UNIT_DAYS)})s?\s+(?P<side>before|after|prior\s+to)\s+(?:the\s+)?$",
    re.IGNORECASE,
)
_UNTIL_CUE = re.compile(r"\b(?:before|until|till|by|prior\s+to)\s+(?:the\s+)?$", re.IGNORECASE)
_SINCE_CUE = re.compile(r"\b(?:after|since|from)\s+(?:the\s+)?$", re.IGNORECASE)


def _iso(year: int, month: int | None = None, day: int | None = None) -> str | None:
    """An ISO date of the given precision, or None when it is not a real calendar date."""
    try:
        if day is not None and month is not None:
            return date(year, month, day).isoformat()
        if month is not None:
            return f"{date(year, month, 1):%Y-%m}"
        return f"{date(year, 1, 1):%Y}"
    except ValueError:
        return None


def _date_value(m: re.Match[str]) -> str | None:
    g = m.groupdict()
    if g["iy"]:
        return _iso(int(g["iy"]), int(g["im"]), int(g["id"]) if g["id"] else None)
    for d, mo, y in (("d1", "m1", "y1"), ("d2", "m2", "y2"), (None, "m3", "y3")):
        if g[y]:
            return _iso(int(g[y]), month_number(g[mo]), int(g[d]) if d else None)
    return _iso(int(g["y4"])) if g["y4"] else None


def _partial_value(text: str, anchor: str) -> str | None:
    """A range's left end written without the year (or month) of its right end."""
    if (m := DATE.fullmatch(text)) is not None:
        return _date_value(m)
    if (p := _PARTIAL.fullmatch(text)) is None:
        return None
    year, month = int(anchor[:4]), int(anchor[5:7]) if len(anchor) >= 7 else None
    g = p.groupdict()
    if g["d4"]:
        return _iso(year, month, int(g["d4"])) if month else None
    day = g["d1"] or g["d2"]
    return _iso(year, month_number(g["m1"] or g["m2"] or g["m3"]), int(day) if day else None)


@dataclass(frozen=True)
class _Mention:
    start: int
    since: str | None
    until: str | None


def _mentions(question: str) -> list[_Mention]:
    """Every explicit date, range or open bound in the question."""
    out: list[_Mention] = []
    for m in DATE.finditer(question):
        value = _date_value(m)
        before = question[: m.start()]
        if value is None:
            continue
        if (head := _RANGE_HEAD.search(before)) and (
            left := _partial_value(head.group("left").strip(" ,"), value)
        ):
            out = [x for x in out if x.start < head.start()]
            out.append(_Mention(head.start(), left, value))
            continue
        if m.group("y4") and not _YEAR_CUE.search(before):
            continue
        if span := _SPAN_CUE.search(before):
            out.append(_span(m.start(), value, span))
        elif _UNTIL_CUE.search(before):
            out.append(_Mention(m.start(), None, value))
        elif _SINCE_CUE.search(before):
            out.append(_Mention(m.start(), value, None))
        else:
            out.append(_Mention(m.start(), value, value))
    return out


def _span(start: int, value: str, cue: re.Match[str]) -> _Mention:
    """The days between a day and the span before or after it, that day included: what
    happened "the week before" a day was often said on that day, as "last week"."""
    n = cue.group("n") or "1"
    days = (int(n) if n.isdigit() else NUMBER_WORDS[n.lower()]) * _UNIT_DAYS[
        cue.group("unit").lower()
    ]
    if cue.group("side").lower() == "after":
        return _Mention(start, value, (_last_day(value) + timedelta(days=days)).isoformat())
    return _Mention(start, (_first_day(value) - timedelta(days=days)).isoformat(), value)


def _first_day(value: str) -> date:
    return date_bounds(value)[0]


def _last_day(value: str) -> date:
    return date_bounds(value)[1]


def temporal_filter_of(question: str) -> TemporalFilter | None:
    """The span of the explicit dates in the question ("in May 2023", "on 8 May 2023",
    "in 2022", "between March and June 2023", "before 2023-05-08"); None for vague or no
    time wording."""
    mentions = _mentions(question)
    if not mentions:
        return None
    # The union of the mentions: one open side leaves that side of the union open.
    sinces = [x.since for x in mentions]
    untils = [x.until for x in mentions]
    since = "" if None in sinces else min(cast("list[str]", sinces), key=_first_day)
    until = "" if None in untils else max(cast("list[str]", untils), key=_last_day)
    if not since and not until:
        return None
    try:
        return TemporalFilter(since=since, until=until)
    except ValidationError:
        return None  # the dates contradict each other (`until` before `since`)
