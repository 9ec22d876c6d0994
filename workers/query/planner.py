"""Query planning: one LLM call, or a deterministic heuristic without one (DESIGN §8.1-8.2).

The plan is the only generative step at query time (paper §3.5, App. C.4): a question
type, semantic queries, an optional temporal filter and the evidence routes that the
non-generative recall executes. `LLMPlanner.plan` never raises for a bad or missing
reply: it logs why and answers with `heuristic_plan` instead.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Annotated, Any, cast

import structlog
from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
)

from schemas.errors import LycheeError
from schemas.plan import (
    MAX_QUERIES,
    MAX_ROUTE_QUERIES,
    MAX_ROUTES,
    Plan,
    QuestionType,
    Route,
    TemporalFilter,
    date_bounds,
)
from schemas.records import TokenUsage
from workers.llm import (
    ChatCaller,
    CompletionError,
    content,
    json_object,
    reply_date,
    schema_errors,
    usage_of,
)

log = structlog.get_logger("lychee.planner")

# --- vocabulary ------------------------------------------------------------------------


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


QUESTION_WORDS = _wordset("what when where who whom whose which why how")
AUXILIARIES = _wordset(
    "do does did is are was were am be been being has have had will would can could should "
    "shall may might must"
)
_FUNCTION_WORDS = _wordset("""a an the and or but nor of to in on at for from with without by about as into onto
    over under than then that this these those there here it its i me my mine we us our ours
    you your yours he him his she her hers they them their theirs not no yes any some ever
    also just very so too if whether ago long many much often time times first last next
    previous both all each every either neither other another more most less least between
    before after since until during while again please tell remind know say said s up out
    one ones thing things kind kinds type types""")
STOPWORDS = QUESTION_WORDS | AUXILIARIES | _FUNCTION_WORDS
_DETERMINERS = _wordset("the a an my his her their our your its this that these those")
_CONNECTORS = _wordset("or and both either neither versus vs")

_MONTHS = {
    "jan": 1, "january": 1, "feb": 2, "february": 2, "mar": 3, "march": 3, "apr": 4,
    "april": 4, "may": 5, "jun": 6, "june": 6, "jul": 7, "july": 7, "aug": 8, "august": 8,
    "sep": 9, "sept": 9, "september": 9, "oct": 10, "october": 10, "nov": 11,
    "november": 11, "dec": 12, "december": 12,
}  # fmt: skip
_WEEKDAYS = _wordset("monday tuesday wednesday thursday friday saturday sunday")
_NOT_NAMES = QUESTION_WORDS | AUXILIARIES | frozenset(_MONTHS) | _WEEKDAYS | {"i"}

# --- question type ---------------------------------------------------------------------

_PRIOR = re.compile(
    r"\byou\s+(said|told|recommended|suggested|mentioned|gave|wrote|listed|proposed|advised"
    r"|shared|named)\b|\bdid\s+you\b|\byour\s+(previous|earlier|last|prior)\b",
    re.IGNORECASE,
)
_ADVICE = re.compile(
    r"\b(recommend\w*|suggest\w*|advice|advise|tips?)\b|\bshould\s+i\b|\bwhat\s+should\b",
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


def question_type_of(question: str) -> QuestionType:
    """The first rule whose wording matches, in order of specificity; else `single`."""
    if not any(t.lower() not in STOPWORDS for t in _words(question)):
        return QuestionType.other
    for qtype, pattern in _TYPE_RULES:
        if pattern.search(question):
            return qtype
    return QuestionType.single


# --- tokens, names, key phrases --------------------------------------------------------

_TOKEN = re.compile(r"\w+(?:['’]\w+)*|[^\w\s]")
_SENTENCE_END = frozenset('.!?:;"“”')
# A capitalized word right after one of these is more likely a place than a person.
_PLACE_PREPOSITIONS = _wordset("in at to from near into around across through")


@dataclass(frozen=True)
class _Tok:
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


_END = _Tok(".", False)


def _date_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of dates and capitalized month names, overlaps merged."""
    spans = [m.span() for m in _DATE.finditer(text)]
    spans += [m.span() for m in _MONTH_WORD.finditer(text) if m.group(0)[0].isupper()]
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _tokens(text: str) -> list[_Tok]:
    spans = _date_spans(text)
    out: list[_Tok] = []
    start = True
    for m in _TOKEN.finditer(text):
        word = m.group(0)[0].isalnum() or m.group(0)[0] == "_"
        span = next((s for s in spans if s[0] <= m.start() < s[1]), None)
        out.append(_Tok(m.group(0), word, start and word, span))
        if word:
            start = False
        elif m.group(0) in _SENTENCE_END:
            start = True
    return out


def _words(text: str) -> list[str]:
    return [t.text for t in _tokens(text) if t.is_word]


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
    ("to Lisbon"): without a speaker list, fewer routes is the safer mistake.
    """
    if speakers:
        return _mentioned_speakers(question, speakers)
    names: list[str] = []
    run: list[str] = []
    previous = ""
    for tok in [*_tokens(question), _END]:
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
    for tok in _tokens(question):
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


def noun_phrases(question: str, limit: int = 3) -> list[str]:
    """Up to `limit` runs of consecutive content words, in order; stopwords, punctuation,
    numbers and dates break a run (the temporal filter carries the dates)."""
    runs: list[str] = []
    run: list[str] = []
    for tok in [*_tokens(question), _END]:
        if (
            tok.is_word
            and tok.date_span is None
            and not tok.text.isdigit()
            and tok.norm not in STOPWORDS
            and tok.text.lower() not in STOPWORDS
        ):
            run.append(tok.text)
            continue
        if run:
            runs.append(" ".join(run))
        run = []
    return runs[:limit]


def _norm(query: str) -> str:
    return " ".join(query.casefold().split())


def unique_queries(queries: Iterable[str], cap: int) -> list[str]:
    """Whitespace-collapsed, blank-free, first of each case-insensitive duplicate, at most `cap`."""
    out: dict[str, str] = {}
    for q in queries:
        text = " ".join(q.split())
        if text and _norm(text) not in out:
            out[_norm(text)] = text
            if len(out) == cap:
                break
    return list(out.values())


# --- compared items --------------------------------------------------------------------


def _item_right(toks: list[_Tok], start: int) -> tuple[list[str], int]:
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
        if (proper and not tok.capitalized) or (not proper and tok.norm in STOPWORDS):
            break
        content.append(tok.text)
        i += 1
    return det + content, len(content)


def _item_left(toks: list[_Tok], end: int, size: int) -> list[str]:
    """The item before a connector, at most as long as the item after it."""
    i = end
    content: list[str] = []
    proper = i >= 0 and toks[i].capitalized
    while i >= 0 and toks[i].is_word and len(content) < max(size, 1):
        tok = toks[i]
        if (proper and not tok.capitalized) or (not proper and tok.norm in STOPWORDS):
            break
        content.insert(0, tok.text)
        i -= 1
    if content and i >= 0 and toks[i].is_word and toks[i].text.lower() in _DETERMINERS:
        content.insert(0, toks[i].text)
    return content


def compared_items(question: str) -> list[str]:
    """The two items around the first ' or ' (else ' and '): "tea or coffee" -> [tea, coffee]."""
    toks = _tokens(question)
    for connector in ("or", "and"):
        for c, tok in enumerate(toks):
            if not tok.is_word or tok.text.lower() != connector:
                continue
            right, size = _item_right(toks, c + 1)
            left = _item_left(toks, c - 1, size)
            if size and left and _norm(" ".join(left)) != _norm(" ".join(right)):
                return [" ".join(left), " ".join(right)]
    return []


def _without(text: str, others: Sequence[str]) -> str:
    """`text` with the other items (and a connector next to each) removed."""
    toks = [t for t in _tokens(text) if t.is_word]
    drop: set[int] = set()
    for other in others:
        span = [t.norm for t in _tokens(other) if t.is_word]
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


# --- dates -----------------------------------------------------------------------------

_MONTH = r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?" \
    r"|sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"  # fmt: skip
_MONTH_WORD = re.compile(rf"\b{_MONTH}(?!\w)", re.IGNORECASE)
_ORD = r"(?:st|nd|rd|th)?"
_DATE = re.compile(
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


def _month(text: str | None) -> int | None:
    return _MONTHS.get(text.rstrip(".").lower()) if text else None


def _date_value(m: re.Match[str]) -> str | None:
    g = m.groupdict()
    if g["iy"]:
        return _iso(int(g["iy"]), int(g["im"]), int(g["id"]) if g["id"] else None)
    for d, mo, y in (("d1", "m1", "y1"), ("d2", "m2", "y2"), (None, "m3", "y3")):
        if g[y]:
            return _iso(int(g[y]), _month(g[mo]), int(g[d]) if d else None)
    return _iso(int(g["y4"])) if g["y4"] else None


def _partial_value(text: str, anchor: str) -> str | None:
    """A range's left end written without the year (or month) of its right end."""
    if (m := _DATE.fullmatch(text)) is not None:
        return _date_value(m)
    if (p := _PARTIAL.fullmatch(text)) is None:
        return None
    year, month = int(anchor[:4]), int(anchor[5:7]) if len(anchor) >= 7 else None
    g = p.groupdict()
    if g["d4"]:
        return _iso(year, month, int(g["d4"])) if month else None
    day = g["d1"] or g["d2"]
    return _iso(year, _month(g["m1"] or g["m2"] or g["m3"]), int(day) if day else None)


@dataclass(frozen=True)
class _Mention:
    start: int
    since: str | None
    until: str | None


def _mentions(question: str) -> list[_Mention]:
    """Every explicit date, range or open bound in the question."""
    out: list[_Mention] = []
    for m in _DATE.finditer(question):
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
        if _UNTIL_CUE.search(before):
            out.append(_Mention(m.start(), None, value))
        elif _SINCE_CUE.search(before):
            out.append(_Mention(m.start(), value, None))
        else:
            out.append(_Mention(m.start(), value, value))
    return out


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


# --- the heuristic planner -------------------------------------------------------------


def _focus_queries(item: str, others: Sequence[str], key: str) -> list[str]:
    focused = _without(key, others)
    if _norm(item) not in _norm(focused):
        focused = f"{item} {focused}"
    content = [
        t.text
        for t in _tokens(focused)
        if t.is_word and t.date_span is None and t.text.lower() not in STOPWORDS
    ]
    return unique_queries([focused, " ".join(content), item, key], MAX_ROUTE_QUERIES)


def _speaker_of(text: str, names: Sequence[str]) -> str | None:
    inside = [n for n in names if re.search(rf"(?<!\w){re.escape(n)}(?!\w)", text)]
    return inside[0] if len(inside) == 1 else None


def heuristic_plan(question: str, speakers: Sequence[str] = ()) -> Plan:
    """A plan from the wording alone (DESIGN §8.2): deterministic, no model, no I/O.

    One route per compared item ("tea or coffee") in a comparison, else one per named
    speaker when two or more are named, else a single route.
    """
    question = " ".join(question.split())
    if not question:
        raise ValueError("the question is blank")
    qtype = question_type_of(question)
    names = named_people(question, speakers)
    key = key_phrase(question)
    base = unique_queries([question, key, *noun_phrases(question)], MAX_QUERIES)
    items = compared_items(question) if qtype is QuestionType.comparison else []
    if len(items) < 2:
        items = names if len(names) >= 2 else []

    routes: list[Route] = []
    only = names[0] if len(names) == 1 else None
    for item in items[:MAX_ROUTES]:
        others = [o for o in items if o != item]
        speaker = _speaker_of(item, names) or only
        routes.append(
            Route(
                goal=f"Evidence about {item} for: {question}",
                queries=_focus_queries(item, others, key),
                constraints=[f"speaker: {speaker}"] if speaker else [],
                speaker=speaker,
            )
        )
    if not routes:
        routes.append(
            Route(
                goal=f"Evidence needed to answer: {question}",
                queries=base[:MAX_ROUTE_QUERIES],
                constraints=[f"speaker: {only}"] if only else [],
                speaker=only,
            )
        )
    window = temporal_filter_of(question)
    time_constraint = (
        [f"time: {window.since or '...'} to {window.until or '...'}"] if window else []
    )
    return Plan(
        question_type=qtype,
        semantic_queries=unique_queries(
            [*base, *(q for r in routes for q in r.queries)], MAX_QUERIES
        ),
        temporal_filter=window,
        evidence_target=key or question,
        evidence_constraints=[*names, *time_constraint],
        constraints=[*(f"entity: {n}" for n in names), *time_constraint],
        routes=routes,
        source="heuristic",
    )


# --- the LLM planner: prompt -----------------------------------------------------------

PLANNER_SYSTEM_PROMPT = """\
You plan how to search a long memory of past conversations for the evidence a question \
needs. You do not answer the question: you describe what to look for.

## What you receive
- <USER_QUERY>: the question to plan for.
- <RECENT_CONTEXT>: the latest turns of the current conversation, possibly empty. Use them \
only to understand who or what the question refers to.

## Rules
1. Plan from the visible wording only. Never decide whether the answer exists, never guess \
it, and never put candidate answers (names, places, dates, objects not in the question) \
into the plan.
2. question_type is the form of the question:
   - single: an ordinary who/what/where/why/how question about one fact, event, \
preference, plan or object. This is the usual case, also for a question about one named \
person in a conversation between two people.
   - temporal: the answer needs a date, an approximate date, an order, a duration, a \
recurrence or a relative-time conversion.
   - comparison: the question directly compares two or more things on something other \
than time.
   - aggregate: the question asks for a count, a list, a set, a total or every matching item.
   - personalized_advice: the question asks for advice or a recommendation.
   - prior_assistant_response: the question asks what the assistant said earlier.
   - other: none of the above.
3. semantic_queries: 3 to 8 short, precise search phrases. Keep every name of a person, \
place or thing exactly as written, and never replace a named person with "the user". Put \
the named person together with the key verb or attribute in most queries, and add one or \
two paraphrases in the words people would likely have used in the conversation. Write \
them in the language of the question.
4. evidence_target: the one fact, event, detail or set the answer depends on. \
evidence_constraints: a few short conditions visible in the question (the person, the key \
predicate, the attribute asked for, an explicit time or status). Add no hidden requirements.
5. evidence_routes: one route by default, aimed at the person and predicate of the \
question. Use several routes only when the question needs separate evidence: two named \
people, two events or things being compared, the two endpoints of a duration, or a count \
or list over several members. Never split off helper routes for background, current \
state or candidate events. Each route has a short evidence_goal, 3 to 5 queries of its \
own, optional constraints, an optional temporal_filter and the speaker it is about (empty \
when none).
6. temporal_filter: only for a concrete date or an unambiguous range that can be written \
as YYYY-MM-DD (or YYYY-MM, YYYY). "on DATE" sets since and until to DATE; "before DATE" \
sets only until; "after DATE" or "since DATE" sets only since. Leave it empty ({}) for \
vague wording such as "recently", "earlier", "last week" or "next month".
7. Before replying, check that the plan is compact: merge the routes of a simple question \
about one person into one, add the right person's name to queries that could match \
someone else, and remove anything that guesses the answer.

## Output
Reply with one raw JSON object and nothing else (no markdown, no code fences):
{
  "reason": "one sentence: what is asked, the target, the search strategy",
  "question_type": "single | aggregate | temporal | comparison | personalized_advice | \
prior_assistant_response | other",
  "semantic_queries": ["search phrase"],
  "temporal_filter": {"since": "", "until": ""},
  "evidence_target": "",
  "evidence_constraints": ["short condition"],
  "constraints": ["kind: value"],
  "evidence_routes": [
    {
      "evidence_goal": "the evidence this route should find",
      "queries": ["route-specific search phrase"],
      "constraints": ["kind: value"],
      "temporal_filter": {},
      "speaker": ""
    }
  ]
}
"""

PLANNER_USER_TEMPLATE = """\
<USER_QUERY>
{question}
</USER_QUERY>

<RECENT_CONTEXT>
{recent_context}
</RECENT_CONTEXT>"""


def build_planner_messages(question: str, recent_context: str = "") -> list[dict[str, str]]:
    """[system, user]: the planning rules, then the question and the recent turns."""
    user = PLANNER_USER_TEMPLATE.format(
        question=question.strip(), recent_context=recent_context.strip()
    )
    return [
        {"role": "system", "content": PLANNER_SYSTEM_PROMPT},
        {"role": "user", "content": user},
    ]


# --- the LLM planner: reply ------------------------------------------------------------


class PlanReplyError(LycheeError, ValueError):
    """The planner's reply cannot become a plan; `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"unusable plan reply: {reason}")
        self.reason = reason


def _as_strings(v: Any) -> Any:
    """Lists of strings as a model writes them: null, one string, or {"kind", "value"} items."""
    if v is None:
        return []
    if not isinstance(v, list):
        v = [v]
    out: list[Any] = []
    for item in v:
        if isinstance(item, dict) and "value" in item:
            value = str(item.get("value") or "").strip()
            kind = str(item.get("kind") or "").strip()
            item = f"{kind}: {value}" if kind and value else value
        elif isinstance(item, int | float) and not isinstance(item, bool):
            item = str(item)
        if isinstance(item, str):
            item = " ".join(item.split())
            if not item:
                continue
        out.append(item)
    return out


def _as_text(v: Any) -> Any:
    return "" if v is None else " ".join(v.split()) if isinstance(v, str) else v


class _ReplyFilter(BaseModel):
    model_config = ConfigDict(extra="ignore")

    since: str = ""
    until: str = ""

    @field_validator("since", "until", mode="before")
    @classmethod
    def _date(cls, v: Any) -> Any:
        return reply_date(v)

    def to_filter(self) -> TemporalFilter | None:
        """None when both sides are empty; a ValidationError for a date that is not ISO."""
        return (
            TemporalFilter(since=self.since, until=self.until) if self.since or self.until else None
        )


def _as_filter(v: Any) -> Any:
    return None if v is None or v == "" or v == {} or v == [] else v


# fields as a model writes them, normalized before validation
_Strings = Annotated[list[str], BeforeValidator(_as_strings)]
_Text = Annotated[str, BeforeValidator(_as_text)]
_Filter = Annotated[_ReplyFilter | None, BeforeValidator(_as_filter)]


class _ReplyRoute(BaseModel):
    model_config = ConfigDict(extra="ignore")

    goal: _Text = Field(default="", validation_alias=AliasChoices("evidence_goal", "goal"))
    queries: _Strings = Field(default_factory=list)
    constraints: _Strings = Field(default_factory=list)
    temporal_filter: _Filter = None
    speaker: _Text = ""


class _Reply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    question_type: QuestionType
    semantic_queries: _Strings = Field(default_factory=list)
    temporal_filter: _Filter = None
    evidence_target: _Text = ""
    evidence_constraints: _Strings = Field(default_factory=list)
    constraints: _Strings = Field(default_factory=list)
    routes: list[_ReplyRoute] = Field(
        default_factory=list, validation_alias=AliasChoices("evidence_routes", "routes")
    )

    @field_validator("routes", mode="before")
    @classmethod
    def _routes(cls, v: Any) -> Any:
        return [] if v is None else [v] if isinstance(v, dict) else v

    @field_validator("question_type", mode="before")
    @classmethod
    def _qtype(cls, v: Any) -> Any:
        # "Personalized advice" and "personalized-advice" are the same answer.
        return "_".join(v.strip().lower().replace("-", " ").split()) if isinstance(v, str) else v


def _route(reply: _ReplyRoute, speakers: Sequence[str]) -> Route | None:
    queries = unique_queries(reply.queries, MAX_ROUTE_QUERIES) or unique_queries([reply.goal], 1)
    if not queries:
        return None
    speaker = reply.speaker or _speaker_of(" ".join([reply.goal, *queries]), speakers) or ""
    canonical = {s.casefold(): s for s in speakers}
    return Route(
        goal=reply.goal,
        queries=queries,
        constraints=reply.constraints,
        temporal_filter=reply.temporal_filter.to_filter() if reply.temporal_filter else None,
        speaker=canonical.get(speaker.casefold(), speaker) or None,
    )


def _decode(raw: str) -> dict[str, Any]:
    try:
        return json_object(raw)
    except ValueError as exc:
        raise PlanReplyError(str(exc)) from exc


def parse_plan_reply(raw: str, speakers: Sequence[str] = ()) -> Plan:
    """The plan in an LLM reply, with over-cap lists truncated and duplicate or blank queries
    dropped; PlanReplyError for invalid JSON, a schema violation or a plan without routes."""
    data = _decode(raw)
    try:
        reply = _Reply.model_validate(data)
        routes = [r for r in (_route(x, speakers) for x in reply.routes) if r is not None]
        if not routes:
            raise PlanReplyError("the plan has no usable evidence_routes")
        semantic = unique_queries(reply.semantic_queries, MAX_QUERIES) or unique_queries(
            (q for r in routes for q in r.queries), MAX_QUERIES
        )
        return Plan(
            question_type=reply.question_type,
            semantic_queries=semantic,
            temporal_filter=reply.temporal_filter.to_filter() if reply.temporal_filter else None,
            evidence_target=reply.evidence_target,
            evidence_constraints=reply.evidence_constraints,
            constraints=reply.constraints,
            routes=routes[:MAX_ROUTES],
            source="llm",
        )
    except ValidationError as exc:
        raise PlanReplyError(schema_errors(exc)) from exc


# --- the LLM planner -------------------------------------------------------------------


class LLMPlanner(ChatCaller):
    """One chat completion per question (temperature 0, JSON mode), retried only on
    `is_retryable` errors with full-jitter backoff that honours Retry-After; any unusable
    outcome falls back to `heuristic_plan`, logged, never raised.

    A Retry-After longer than `max_delay_s` ends the attempts at once: a question waits
    for its plan, so the heuristic is better than a long sleep.
    """

    async def plan(
        self, question: str, speakers: Sequence[str] = (), recent_context: str = ""
    ) -> tuple[Plan, TokenUsage]:
        """The LLM's plan, or the heuristic's with the reason logged; the usage of the call
        made (zeros when no completion came back). ValueError only for a blank question."""
        if not question.strip():
            raise ValueError("the question is blank")
        messages = build_planner_messages(question, recent_context)
        try:
            completion = await self._call(messages, self._rng or random.Random(question))
        except Exception as exc:  # the fallback is the contract: no error reaches the caller
            reason = (
                str(exc) if isinstance(exc, CompletionError) else f"{type(exc).__name__}: {exc}"
            )
            return self._fallback(question, speakers, reason, TokenUsage())
        usage = usage_of(completion, messages)
        try:
            return parse_plan_reply(content(completion), speakers), usage
        except PlanReplyError as exc:
            return self._fallback(question, speakers, exc.reason, usage)

    def _fallback(
        self, question: str, speakers: Sequence[str], reason: str, usage: TokenUsage
    ) -> tuple[Plan, TokenUsage]:
        log.warning("planner.fallback", model=self.model, reason=reason[:500])
        return heuristic_plan(question, speakers), usage
