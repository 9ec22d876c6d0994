"""The offline rules that find which record supersedes or contradicts which (no LLM).

The rules, all over the records of one namespace said by the same side (user or
assistant), in the order they were said (the two about named things, `name-change` and
`now-named`, are `workers.indexer.name_links`):

- `value-change`: a later statement gives the same attribute a different value. The
  attribute is what the words around a value name ("the greenhouse heater draws ... 650
  watts"): two statements share it when at least `MIN_SHARED` of those words agree and the
  values are of one kind and unit (a percentage, a duration, an amount of money, a count
  of one thing, a day, in any year when it names none); two owners ("Ana's rent", "Ana's
  sister's rent") or two names ("flight to Berlin", "to Tokyo") make two attributes. The
  later value must also read as a change: a word such as "now", "new", "updated",
  "slipped" just before it, in its clause, or a statement that opens as a correction
  ("Sorry, ..."); anything less sure links nothing. A goal ("trying to reach 100 %") is
  not a measured value, so the two never replace each other (dates excepted: a deadline is
  a plan either way). In "from X to Y" (and "Y instead of X", "Y, up from X") only Y holds;
  a later "from X to Y" replaces an earlier value only when X is that value, else it is the
  change of another thing worded alike; when the same name stands before all three ("runs
  Postgres 15", then "from Postgres 15 to Postgres 16"), the name is the one shared word it
  needs. An assistant's numbers are worked examples and suggestions, not the state of
  things: only the other side's count.
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
from collections.abc import Container, Sequence

from schemas.supersession import LinkKind, Supersession
from workers.indexer.name_links import name_changes, now_named
from workers.indexer.statements import Statement, content_words, earlier, link, said_order
from workers.indexer.values import (
    CLAUSE_END,
    WORD,
    Value,
    as_said,
    attribute_overlap,
    comparable,
    content,
    same_amount,
    same_thing,
    values_of,
)

MIN_SHARED = 2  # attribute words two values must share to name the same thing
SOLE_RATIO = 3.0  # an unqualified value of a word with one qualifier: amounts this near
_SELF_OWNERS = frozenset({"my", "our"})
_WHEN = ("date", "time")  # values of when, named by the words around them, never by one
MAX_DENIAL_CHARS = 600  # a longer record is a pasted request: no denial or account read in it
MAX_LINKS_PER_STATEMENT = 2  # denials: the best-matching accounts only
COMMON_SHARE = 0.1  # a word in more of the namespace's statements than this names no attribute
COMMON_MIN = 5  # ... and in more than this many

# "X has never done Y" (encoders write the speaker's name for "I"), "X hasn't ever done Y"
_NEVER = re.compile(
    r"\b(?:has|have|had|'ve|’ve)\s+(?:actually\s+|really\s+)?never\b"
    r"|\b(?:has|have|did)(?:\s+not|n't|n’t)\s+(?:ever|yet|actually)\b",
    re.IGNORECASE,
)
# a clause that asks, tries or wants rather than tells what happened
_NOT_DONE = re.compile(
    r"\?|\b(?:try|trying|tries|help|helps|can you|could you|would|wondering|wonder|want|wants"
    r"|wanted|not sure|trouble|struggling|confused|how|let's|let us|will|going to|plan"
    r"|planning|should|need|needs|if|whether|hope|hoping|what|which|torn|considering"
    r"|unsure|stuck)\b",
    re.IGNORECASE,
)


_Pair = tuple[Statement, Statement, Value, Value]  # older, newer and their two values


def link_statements(
    namespace: str,
    statements: Sequence[Statement],
    common: frozenset[str] | None = None,
    speakers: Container[str] | None = frozenset(),
) -> list[Supersession]:
    """Every link the rules are sure of among `statements` (one namespace); `common`: the
    namespace's words too frequent to name an attribute (else read from `statements`);
    `speakers`: its speaker names, lowercased (who may make a name change, None: anyone;
    whose value is the speaker's own), asked only of a name a statement gives."""
    if common is None:
        common = common_words([s.text for s in statements])
    links: dict[tuple[LinkKind, str, str], Supersession] = {}
    valued, by_word = _valued(statements, common)
    found = [
        *(
            _value_link(namespace, LinkKind.supersedes, p)
            for p in _value_changes(valued, by_word, common, speakers or frozenset())
        ),
        *(
            _value_link(namespace, LinkKind.conflict, p)
            for p in _value_conflicts(valued, by_word, common, speakers or frozenset())
        ),
        *_denials(namespace, statements, common),
        *name_changes(namespace, statements, common, speakers),
        *now_named(namespace, statements, speakers),
    ]
    for one in found:
        links.setdefault((one.kind, one.older_id, one.newer_id), one)
    return list(links.values())


def common_words(texts: Sequence[str]) -> frozenset[str]:
    """Words too frequent among a namespace's statements to tell one attribute from another:
    the speaker's name that an encoder writes for "I", the project everything is about."""
    df: dict[str, int] = {}
    for text in texts:
        for w in content_words(text):
            df[w] = df.get(w, 0) + 1
    cut = max(COMMON_MIN, COMMON_SHARE * len(texts))
    return frozenset(w for w, n in df.items() if n > cut)


# -- value-change -------------------------------------------------------------------------


_Valued = list[tuple[Statement, list[Value]]]


def _valued(
    statements: Sequence[Statement], common: frozenset[str]
) -> tuple[_Valued, dict[tuple[str, str], list[int]]]:
    """The statements that give values, and which of them name each word (by side)."""
    # an assistant's numbers are worked examples and suggestions, not the state of things
    said = [s for s in statements if s.role != "assistant"]
    valued = [(s, vs) for s in said if (vs := values_of(s.text, common))]
    by_word: dict[tuple[str, str], list[int]] = {}
    for i, (s, vs) in enumerate(valued):
        for v in vs:
            for w in v.whole:
                by_word.setdefault((s.role, w), []).append(i)
    return valued, by_word


def _value_changes(
    valued: _Valued,
    by_word: dict[tuple[str, str], list[int]],
    common: frozenset[str],
    speakers: Container[str],
) -> list[_Pair]:
    """Each statement that changes a value, with the earlier one it changes: the one whose
    attribute shares the most words with it, then has the fewest others ("the review is on
    June 10" before "I start prepping for the review on June 3", for "the review slipped to
    June 20"), then the latest."""
    out = []
    sole = _one_qualifier(valued)
    for j, (newer, new_values) in enumerate(valued):
        best: tuple[tuple[int, int, tuple[int, int]], Statement, Value, Value] | None = None
        candidates = {i for v in new_values for w in v.whole for i in by_word[(newer.role, w)]}
        for i in candidates - {j}:
            older, old_values = valued[i]
            if earlier(older, newer) is not True:
                continue
            pairs = [
                (shared, ov, nv)
                for nv in new_values
                for ov in old_values
                if _changed(
                    ov, nv, shared := attribute_overlap(ov, nv), old_values, common, speakers, sole
                )
            ]
            if not pairs:
                continue
            shared, ov, nv = max(pairs, key=lambda p: p[0])  # the first of the statement's best
            rank = (shared, -len(ov.attribute - nv.attribute), said_order(older))
            if best is None or rank > best[0]:
                best = (rank, older, ov, nv)
        if best is not None:
            out.append((best[1], newer, best[2], best[3]))
    return out


def _one_qualifier(valued: _Valued) -> frozenset[str]:
    """The words values are of that only one qualifier ever comes with ("cloud budget"):
    there "the budget" is that one, while beside "the travel budget" and "the cloud budget"
    it could be either. Read among the statements linked together: a link made before a
    second qualifier was said (in a later batch) stays."""
    qualifiers: dict[str, set[str]] = {}
    for _, values in valued:
        for v in values:
            qualifiers.setdefault(v.head, set()).add(v.modifier)
    return frozenset(h for h, q in qualifiers.items() if h and len(q - {""}) == 1)


def _value_conflicts(
    valued: _Valued,
    by_word: dict[tuple[str, str], list[int]],
    common: frozenset[str],
    speakers: Container[str],
) -> list[_Pair]:
    """Two sessions of one date that each change a value to another: which is later is not
    known, so neither is current; both are shown as a conflict."""
    out = []
    for j, (b, b_values) in enumerate(valued):
        candidates = {i for v in b_values for w in v.whole for i in by_word[(b.role, w)]}
        for i in sorted(i for i in candidates if i < j):
            a, a_values = valued[i]
            if a.session_id == b.session_id or a.said_at is None or a.said_at != b.said_at:
                continue
            found = next(
                (
                    (a, av, bv)
                    for av in a_values
                    for bv in b_values
                    if _changed(av, bv, attribute_overlap(av, bv), a_values, common, speakers)
                    and _changed(bv, av, attribute_overlap(av, bv), b_values, common, speakers)
                ),
                None,
            )
            if found is not None:
                out.append((found[0], b, found[1], found[2]))
    return out


def _value_link(namespace: str, kind: LinkKind, pair: _Pair) -> Supersession:
    older, newer, ov, nv = pair
    words = ", ".join(sorted(as_said(w, newer.text, older.text) for w in ov.whole & nv.whole))
    said = "said the same day" if kind is LinkKind.conflict else "then"
    reason = f"{words}: {ov.shown} {said} {nv.shown}"
    return link(namespace, kind, older, newer, reason, "rule:value-change")


def _changed(
    ov: Value,
    nv: Value,
    shared: int,
    old_values: Sequence[Value],
    common: frozenset[str],
    speakers: Container[str],
    sole: Container[str] = frozenset(),
) -> bool:
    """The newer value replaces the older one: same kind, another amount the older statement
    never gave, the same attribute, and a later statement that reads as a change. Both
    measured or both meant (a date is either), and when the newer one says what it was,
    it was the older value. `sole`: words whose one qualifier an unqualified value may
    leave out (`_one_qualifier`)."""
    if not comparable(ov, nv) or same_amount(ov, nv):
        return False
    if not _named_alike(ov, nv, shared, common, speakers, sole):
        return False
    if not same_thing(ov, nv):
        return False
    if ov.stale or nv.stale or ov.delta or nv.delta:
        return False  # replaced in its own sentence ("from 64% to"); a change's size ("by 25%")
    if ov.goal != nv.goal and nv.kind != "date":
        return False  # a goal against a reading
    if nv.was is not None and nv.was != ov.amount:
        return False  # a change from another value: another thing worded alike
    if any(same_amount(v, nv) and comparable(v, nv) for v in old_values):
        return False  # the older one already knew this value: a restatement, not a change
    return nv.changed or nv.was is not None


def _named_alike(
    ov: Value,
    nv: Value,
    shared: int,
    common: frozenset[str],
    speakers: Container[str],
    sole: Container[str] = frozenset(),
) -> bool:
    """Whether two values name one attribute: `MIN_SHARED` words in common, or one when
    both follow the same name and the newer statement gives the older value as what it was
    ("runs Postgres 15", then "from Postgres 15 to Postgres 16"), or when a day said to
    have changed is of the same word as the older day and names nothing its words do not
    ("the launch is planned for June 3", then "the launch slipped to July 15": a plan's
    one-word subject), or when a value said to have changed is of the same word right
    before both ("Ana's budget is $40,000", then "finance cut Ana's budget to $32,000"),
    qualified alike (not "the travel budget" beside "our budget", nor "costs $50 for the
    hosting" beside "$20 for the domain"; "the budget" may leave out the one qualifier its
    namespace gives budgets, `sole`), of one owner (not "my salary" beside "my wife's
    salary"), and that word is not common in the namespace. An old
    amount alone is weak evidence: small counts recur ("3 kids", then a neighbour's "5 kids
    instead of 3")."""
    if ov.label and ov.label == nv.label and nv.was == ov.amount:
        return shared >= 1
    if nv.kind == "date" and nv.changed and nv.attribute and nv.attribute <= ov.attribute:
        return shared >= 1 and (nv.head == ov.head or ov.head in nv.attribute)
    return shared >= MIN_SHARED or _same_head(ov, nv, common, speakers, sole)


def _same_head(
    ov: Value, nv: Value, common: frozenset[str], speakers: Container[str], sole: Container[str]
) -> bool:
    """A changed value of the word right before both, qualified alike (or the newer one
    unqualified, of a word `sole` names), of one owner (`_named_alike`)."""
    if nv.kind in _WHEN or not nv.changed or nv.head != ov.head or ov.head not in ov.attribute:
        return False
    alike = ov.modifier == nv.modifier or (
        not nv.modifier and nv.head in sole and _near(ov, nv) and ov.following == nv.following
    )
    if not alike or not _one_owner(ov.whose, nv.whose, common, speakers):
        return False
    return not (ov.following and nv.following and not ov.following & nv.following)


def _near(ov: Value, nv: Value) -> bool:
    """Amounts within `SOLE_RATIO` of each other: "the budget is now $2,500" of "our cloud
    budget is $4,000", not "the rent went up to $1,350" of "the parking rent is $100"."""
    low, high = sorted((abs(ov.amount), abs(nv.amount)))
    return low > 0 and high <= SOLE_RATIO * low


def _one_owner(a: str, b: str, common: frozenset[str], speakers: Container[str]) -> bool:
    """The same owner, or one unsaid beside the speaker's own ("my", "our", or the name an
    encoder writes for "I": a speaker's, or common in the namespace): "the budget" is Ana's
    when Ana speaks, not her sister's."""
    if a == b:
        return True
    said = a or b
    if a and b:
        return False
    return said in _SELF_OWNERS or said in common or said in speakers


# -- never-but-did --------------------------------------------------------------------------


def denied(text: str, common: frozenset[str] = frozenset()) -> frozenset[str] | None:
    """What a statement says was never done (its content words to the clause's end), or None
    when it denies nothing."""
    m = _NEVER.search(text)
    if m is None:
        return None
    rest = CLAUSE_END.split(text[m.end() :], maxsplit=1)[0]
    words = frozenset(content(WORD.findall(rest.lower()))) - common
    return words if len(words) >= MIN_SHARED else None


def told(text: str) -> frozenset[str]:
    """The content words of a statement that tells what happened; none when it asks, tries,
    wants, weighs or has trouble anywhere ("can you help me deploy it" is not having
    deployed it, and such a message's other clauses are background to the request)."""
    if _NOT_DONE.search(text):
        return frozenset()
    return content_words(text)


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
            settled = max(later, key=lambda i: said_order(statements[i]))
            out.append(_denial_link(namespace, denial, statements[settled], what, settles=True))
            continue
        for _, i in sorted(
            before, key=lambda x: (x[0], said_order(statements[x[1]])), reverse=True
        )[:MAX_LINKS_PER_STATEMENT]:
            out.append(_denial_link(namespace, statements[i], denial, what, settles=False))
    return out


def _denial_link(
    namespace: str, older: Statement, newer: Statement, what: frozenset[str], settles: bool
) -> Supersession:
    said = ", ".join(sorted(what))
    kind = LinkKind.supersedes if settles else LinkKind.conflict
    reason = (
        f"said never done ({said}), then done" if settles else f"done, then said never ({said})"
    )
    return link(namespace, kind, older, newer, reason, "rule:never-but-did")
