"""Who a turn's pronouns stand for, for the offline encoder (DESIGN §6.4).

First person is the speaker, second person the one addressed, "we" the speaker and the
companion the turn names or both speakers of a two-person segment, a plural "you" ("you
guys", "both of you") the other speakers. A reflexive ("myself") stays a reflexive, in the
third person, since its antecedent is the subject the rules already name ("Ana built it
themself"), unless it is one of two people joined by "and". Rules over the words alone: a
pronoun whose referent the segment does not tell is left as written.
"""

from __future__ import annotations

import re
from collections.abc import Sequence, Set
from dataclasses import dataclass

from workers.vocabulary import wordset

_ADVERBS = (
    "really|also|just|still|always|never|usually|often|sometimes|actually|totally|definitely|even"
    "|only|truly|absolutely|mostly|rarely|seriously|highly|finally|recently|already|honestly"
    "|now|currently|mainly|generally|normally|typically|regularly|primarily|occasionally"
)
# "told you all about it", "wish you all the best": "all" of the thing, not of the people
_NOT_ALL = "about|the|that|this|these|those|of|over|along|day|night|week|year|my|your|a|an"
PRONOUN = re.compile(
    rf"\b(?:(?P<yall>[Yy]ou (?:guys|two|three|both|folks|all(?! (?:{_NOT_ALL})\b))"
    r"|(?:[Bb]oth|[Aa]ll) of you|[Yy]['’]all)"
    r"|(?P<joined>[Mm]yself|[Yy]ourself)(?= and [A-Z])"
    r"|(?P<mate>[A-Z][\w’'-]+ and )(?P<self>myself|yourself)"
    r"|(?P<refl>[Mm]yself|[Yy]ourself|[Oo]urselves|[Yy]ourselves)"
    r"|(?P<sc>I|[Yy]ou)['’](?P<ic>m|re|ve|ll|d)"
    rf"|(?P<sv>I|[Yy]ou)(?P<adv>(?: (?:{_ADVERBS}))*) (?P<verb>[a-z]+(?:['’]t)?)"
    r"|(?P<i>I)"
    r"|[Ww]e['’](?P<wec>re|ve|ll|d)"
    r"|(?P<poss>[Mm]y|[Mm]ine|[Oo]urs?)"
    r"|(?P<yposs>[Yy]ours?)"
    r"|(?P<obj>[Mm]e)"
    r"|(?P<you>[Yy]ou)"
    r"|(?P<plural>[Ww]e|us))\b"
)
# "Kai and me", "me and Kai": whom the speaker's "we" means in that turn; not a place that
# ends a clause before the next one ("I live in Porto and I work ...")
_COMPANION = re.compile(
    r"\b(?P<a>[A-Z][\w’'-]+) and (?:me|I|myself)\b|\b(?:me|I) and (?P<b>[A-Z][\w’'-]+)\b"
)
_PLACE_BEFORE = re.compile(r"\b(?:in|at|from|near|around)\s+$")
_I_CONTRACTED = {"m": "is", "re": "is", "ve": "has", "ll": "will", "d": "would"}
_WE_CONTRACTED = {"re": "are", "ve": "have", "ll": "will", "d": "would"}
_IRREGULAR = {"am": "is", "are": "is", "were": "was", "have": "has", "do": "does"}
_IRREGULAR |= {"don't": "doesn't", "don’t": "doesn’t", "aren't": "isn't", "aren’t": "isn’t"}
_IRREGULAR |= {"haven't": "hasn't", "haven’t": "hasn’t"}
# Present-tense verbs conjugated after the speaker's name; any other word is left as written,
# since "read" or "went" must not become "reads" or "wents".
_VERBS = wordset(
    "love like enjoy want need think feel hope know go work live play plan prefer hate miss "
    "wish wonder find keep use teach volunteer paint run write cook bake believe guess mean "
    "agree remember try get make take see say visit practice study collect own dance sing "
    "swim hike draw care spend watch listen look dream support struggle appreciate cherish "
    "understand stay start hear give bring come promise mentor rely recommend learn call meet fly "
    "leave move travel drive walk ask tell share send show mention build develop design deploy "
    "host manage lead handle fix test check code create maintain"
)


@dataclass(frozen=True)
class Persons:
    """Who the pronouns of one turn stand for."""

    me: str  # the speaker ("the user" when unnamed)
    you: str | None = None  # the one addressed, when the segment tells
    we: str | None = None  # "we": the speaker and whom; None = "<me> and others"
    yall: str | None = None  # a plural "you": the other speakers, or "<you> and others"


def persons_of(
    who: str,
    named: bool,
    body: str,
    speakers: Sequence[str],
    before: str | None,
    not_names: Set[str],
    assistants: Set[str] = frozenset(),
) -> Persons:
    """The speaker; the addressee (the other speaker of a two-person segment, else the
    previous turn's speaker); "we" as the speaker and the companion the turn names ("Kai
    and me"), else both speakers of a two-person segment, but for a user speaking with an
    assistant (`assistants`: their names): the user's "we" is their team or household ("we
    run Postgres", "our partner API"), not the assistant."""
    me = who if named else f"the {who}"
    others = [s for s in speakers if s != who]
    you = others[0] if len(others) == 1 else (before if before and before != who else None)
    yall = _joined(others) if len(others) > 1 else f"{you} and others" if you else None
    companion = next((m for m in _COMPANION.finditer(body) if not _a_place(body, m)), None)
    mate = (companion.group("a") or companion.group("b")) if companion else None
    if mate and mate not in not_names and mate != who:
        return Persons(me, you, f"{me} and {mate}", yall)
    both = named and len(others) == 1 and (who in assistants or others[0] not in assistants)
    return Persons(me, you, f"{me} and {others[0]}" if both else None, yall)


def _a_place(body: str, m: re.Match[str]) -> bool:
    """A place that ends one clause before the next ("in Porto and I work"): no companion
    ("say hi to Kai and me" names one)."""
    return m.group(0).endswith(" I") and bool(
        _PLACE_BEFORE.search(body[max(0, m.start() - 8) : m.start()])
    )


def _joined(names: Sequence[str]) -> str:
    return f"{', '.join(names[:-1])} and {names[-1]}"


def pronoun(m: re.Match[str], p: Persons) -> str:
    """First person -> the speaker, second -> the addressee, "we" -> `Persons.we`.

    Without a known companion "we" is "<speaker> and others": it keeps the speaker
    searchable without inventing who they were. A "you" whose addressee is unknown stays.
    """
    if m.group("refl"):
        singular = m.group().lower() in ("myself", "yourself")
        return "themself" if singular else "themselves"
    if m.group("yall"):
        return p.yall or m.group()
    if m.group("self"):  # "Kai and myself"
        who = p.me if m.group("self") == "myself" else p.you
        return f"{m.group('mate')}{who}" if who else m.group()
    subject = (m.group("sc") or m.group("sv") or m.group("joined") or "").lower()
    who = p.me if subject in ("", "i", "myself") else p.you
    we = p.we or f"{p.me} and others"
    second = m.group("yposs") or m.group("you")
    if who is None or (second and p.you is None):
        return m.group()
    if m.group("ic"):
        return f"{who} {_I_CONTRACTED[m.group('ic')]}"
    if m.group("verb") is not None:
        return f"{who}{m.group('adv')} {_conjugate(m.group('verb'))}"
    if m.group("wec"):
        return f"{we} {_WE_CONTRACTED[m.group('wec')]}"
    if m.group("poss"):
        ours = m.group("poss").lower().startswith("our") and p.we is not None
        return f"{p.we}'s" if ours else f"{who}'s"
    if m.group("yposs"):
        return f"{p.you}'s"
    if m.group("you"):
        return str(p.you)
    if m.group("plural"):
        return we
    return who  # "I", "me", "myself and Kai"


def _conjugate(verb: str) -> str:
    if verb in _IRREGULAR or verb not in _VERBS:
        return _IRREGULAR.get(verb, verb)
    if verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if verb.endswith("y") and verb[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"
