"""The offline encoder (DESIGN §6.4): typed records from sentences, without an LLM.

It exists so the pipeline runs and is measured without an API key. Every rule is a regex
or a word list applied in turn order, so one segment always yields the same records.
The reference context is not read: this encoder resolves no aliases, and nothing may be
extracted from that context anyway (paper App. E.1).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence, Set
from dataclasses import dataclass, field
from datetime import datetime

from schemas import Role, Segment
from schemas.records import (
    CONTEXT_MAX_CHARS,
    DISAMBIGUATION_MAX_CHARS,
    SEMANTIC_TEXT_MAX_CHARS,
    MemoryRecord,
    MemoryType,
    SourceRole,
    Temporal,
)
from workers.encoder.encoded import EncodedSegment, build_record
from workers.encoder.persons import PRONOUN, Persons, persons_of, pronoun
from workers.encoder.relative_dates import resolve_dates, says_when
from workers.text.markdown import prose_spans
from workers.vocabulary import (
    MONTHS,
    NUMBER_WORDS,
    TAG_STOPWORDS,
    WEEKDAYS,
    wordset,
)

MAX_ENTITIES = 8
MAX_TAGS = 5
MIN_WORDS = 4  # a shorter sentence is kept only when it names something or has a number
MIN_CONTENT_WORDS = 2  # a sentence naming nothing states something only with this many
MAX_CONTEXT_NAMES = 4  # names the neighbouring turns lend a record's searchable context
MAX_CONTEXT_WORDS = 6  # content words of the question a record answers
MAX_ASSISTANT_RECORDS = 3  # an assistant's turn: what it recommended, promised or agreed


_CALENDAR = {m.lower() for m in MONTHS} | set(WEEKDAYS)
_FILLER = wordset(
    "hi hello hey there thanks thank you so much very really oh wow aw aww haha hahaha lol ok "
    "okay sure yes yeah yep no nope cool nice great awesome amazing wonderful lovely sweet glad "
    "congrats congratulations good luck bye see later take care night morning totally exactly "
    "absolutely agreed true same here me too of course problem worries welcome definitely "
    "indeed fantastic incredible beautiful happy proud for to hear that that's it's sounds "
    "looks what a an the is it i i'm i’m long time sorry"
)
# "I'm vegetarian.", "I'm a nurse.": who the speaker is, in fewer words than MIN_WORDS ...
_SELF_IS = re.compile(r"(?:i'm|i’m|i am|we're|we’re|we are)\s+(?:an?\s+)?([a-z][\w-]*)\.?", re.I)
# ... but not how the speaker is at the moment ("I'm fine.", "I'm in.", "I'm lost.") nor a
# word that says nothing of them ("I'm not.", "I'm just.")
_MOMENT = wordset(
    "fine well alright done back ready here there in on out off up down home away late early "
    "free busy around afraid serious kidding joking curious lost confused tired exhausted "
    "excited thrilled stoked listening coming leaving going trying working thinking bored "
    "hungry thirsty sick ill stuck nervous starving impressed speechless sleepy full sad "
    "upset angry scared worried stressed cold hot not also just so too still only "
    "honestly really actually very quite sorry"
)
_NOT_WHO = _FILLER | _MOMENT
# "Hey Bruno, ..." / "Oh wow! ...": an opener cut off before the sentence is read.
_GREETING = re.compile(
    r"^(?:(?:hey|hi|hello|oh|wow|yeah|yes|haha\w*|aww*|thanks)\b[^,.!]{0,20}[,!.]\s+)+", re.I
)
# "Totally agree, Lea." / "Omar, that's rough.": a name called, not a thing said about anyone
_CALLED_LAST = re.compile(r",\s+([A-Z][\w'’]*)([.!]*)$")
_CALLED_FIRST = re.compile(r"^([A-Z][\w'’]*),\s+")
_NAME_ONLY = re.compile(r"[A-Z][\w'’]*[.!]*")  # what "Thanks, Lea." leaves of itself
# "Bye Lea.", "Night, Omar!": a salute and a name, nothing more ("I'm Ana." is kept)
_SALUTE = wordset("hi hello hey bye goodbye thanks thank you night morning congrats cheers")
_CAP_STOP = wordset(
    "I I. I'm I've I'll I'd I’m I’ve I’ll I’d The A An My Our It This That Oh Hey Hi OK"
)
_CAP_STOP |= {w.capitalize() for w in _CALENDAR}
_CAP_WORD = r"(?:Mr|Mrs|Ms|Dr|St)\.|(?:[A-Z]\.)+|[A-Z][\w&'’-]*"  # a title, initials, a word
_CAP_SPAN = re.compile(rf"\b(?:{_CAP_WORD})(?: (?:{_CAP_WORD}))*")
_QUOTED = re.compile(r"[\"“]([^\"“”]{2,80})[\"”]")
_WORD = re.compile(r"[a-z]+(?:['’][a-z]+)?")
# Not after a title or an initial ("Dr. Reyes", "J.K. Morrow").
_SENTENCE_END = re.compile(
    r"(?<!\bMr\.)(?<!\bMrs\.)(?<!\bDr\.)(?<!\bSt\.)(?<!\b[A-Z]\.)(?<=[.!?…])\s+|\n+"
)
# "I prefer short answers with an example, so can you explain recursion?": what a speaker
# prefers, said before they ask, is a preference; the question after it is not a statement
_ASKED = re.compile(
    r"(?:,|;|\s[-–—])\s+(?:(?:so|but|and)\s+)?(?=(?:can|could|would|will|should|do|does|did"
    r"|is|are|am|was|were|have|has|how|what|why|which|where|when|who|any)\b)",
    re.IGNORECASE,
)
# "... a good fit for my career as a 38-year-old baker from Lyon?", "I work as a nurse, so
# ...?": who the speaker is, said inside a question; the role ends at a clause's edge
_ROLE_LEAD = (
    r"(?:my|our)\s+(?:[\w'’-]+\s+){0,3}?(?:background|career|role|position|experience"
    r"|skills|growth|progress|life|days|years)"
    r"|i(?:'m|’m| am| work| have worked|'ve worked|’ve worked)"
    r"(?:\s+(?:working|employed|trained|now|currently|still))?"
)
_ROLE = re.compile(
    rf"\b(?:{_ROLE_LEAD})\s+as\s+(?P<role>an?\s+[^,;:?!.()]+?)"
    r"(?=\s*[,;:?!.()]|\s+(?:and|but|so|which|who|that|with|while|because|to|for)\b|$)",
    re.IGNORECASE,
)
_FIRST_PERSON = re.compile(r"(?:i|i'm|i've|i'd|i'll|my|we|we're|we've|our)\b", re.IGNORECASE)
_THIRD_PERSON = re.compile(r"\b(?:he|him|his|she|her|it|its|they|them|their)\b", re.IGNORECASE)
_CAPTION_LEAD = re.compile(r"^(?:a |an )?(?:photo|picture|image) of ", re.IGNORECASE)
_ITEM_MARK = re.compile(r"^[ \t]*(?:[-*+]|\d{1,3}[.)])[ \t]+", re.MULTILINE)
# A tutorial's pacing ("let's move on", "let's try another one") is no agreement; "let's try
# the Thursday slot" is.
_PACING = (
    r"(?:dive|take|break|get started|start|walk|go|look|explore|begin|move on|recap|summarize"
    r"|practice|continue|work through|try (?:another|one more|a few|some more)"
    r"|see (?:how|what|if|whether|why))\b"
)
# What an assistant says that matters later for its user: a recommendation for them, a
# promise, a decision or an agreement, not the lines of a general explanation.
_COMMITMENT = re.compile(
    r"\b(?:i(?:'d| would)? (?:now |still |strongly |really )?(?:recommend|suggest|advise)"
    r"|my (?:recommendation|suggestion)"
    r"|you should|you'll want to|you might want to|i(?:'ll| will) (?!be\b)\w+"
    rf"|let's (?!{_PACING})\w+|we(?:'ve| have)? (?:agreed|decided)"
    r"|as (?:we )?(?:agreed|discussed)|(?:is|are) (?:agreed|decided))\b",
    re.IGNORECASE,
)

# ... but not one that only points at what follows it ("Here's what I recommend.", "Below is
# the plan I'd suggest.") or hands the turn back ("Let me know which you want first."); one
# that goes on after a colon ("Here is the plan we agreed on: ...") says it
_ANNOUNCES = re.compile(
    r"^\W*(?:here(?:'s|’s| is| are)|below (?:is|are)|the following (?:is|are)|let me know"
    r"|feel free|(?:do not|don't) hesitate|if you (?:have|need) (?:any|more))\b(?![^:]*:\s*\S)",
    re.IGNORECASE,
)
# markdown's strong emphasis around words ("**start with SQLite**"), not a power ("2**64")
_STRONG = re.compile(r"(?<![\w*])\*\*(?=\S)(.+?)(?<=\S)\*\*(?![\w*])")

_PAST = (
    r"\w{3,}ed|went|got|took|made|saw|met|bought|ran|won|came|gave|found|began|left|had|did|ate"
    r"|drove|flew|wrote|sang|told|felt|lost|spent|sent|built|caught|brought|sold"
)
_TOOL = "(?:tool|app|feature|software|plugin)"
_TIME = r"(?:ago|last|yesterday|recently|earlier|weekend|morning|night|summer|winter|spring|once)"
_PREFERENCE = re.compile(
    r"\b(?:lov(?:e|es|ed|ing)|enjoy(?:s|ed|ing)?|prefer(?:s|red)?|favou?rite|hate[sd]?"
    r"|dislike[sd]?|can't stand|likes|(?:i|we|you|they|really|also|still|do|don't|would|'d) like)\b"
)
# An instruction that holds from now on ("Always answer with a shell one-liner first when I
# ask about file operations"): a constraint on every later answer, whatever else it mentions;
# after a label that says it is one too ("Some standing instructions: always answer in
# British English"), not after any ("Update: never mind", "Ps: always forget my keys").
_STANDING = re.compile(
    r"^(?:(?:[a-z]+\s+){0,2}(?:instructions?|rules?|reminders?|notes?|guidelines?"
    r"|preferences?)\s*:\s+)?(?:please\s+)?(?:always|never(?! mind)|from now on|whenever"
    r"|(?:do not|don't) ever"
    r"|(?:make sure|remember) to always)\b"
    # its scope said first: "when I ask you about file operations, always answer with ..."
    r"|^when(?:ever)? (?:i|we) (?:ask|request)(?: you| the assistant)? "
    r"(?:about|for|on|regarding|a|an|any)\b[^,.;]{0,120}, (?:please )?"
    r"(?:always|never|answer|reply|respond|give|show|start|use|include|provide|format"
    r"|write|list|put|lead)\b"
    # asked for from now on, said after what: "please answer in French from now on"
    r"|^(?:(?:also|and|ok|okay),?\s+)?(?:please\s+)?(?:answer|reply|respond|write|use|give"
    r"|show|format|include|call|address|talk|speak|keep)\b[^.;]{0,160}\b(?:from now on"
    r"|going forward)\b"
)
# Checked in order on the lowercased sentence, after the preference and dated-event rules.
_TYPE_RULES: list[tuple[MemoryType, str]] = [
    (MemoryType.event, rf"\b(?:{_PAST})\b.*\b{_TIME}\b|\b{_TIME}\b.*\b(?:{_PAST})\b"),
    (MemoryType.constraint, r"\b(?:can't|cannot|can not)\b(?! wait| believe)"),
    (MemoryType.constraint, r"\bmust\b(?! have been| be\b)|\ballergic\b|\bnot allowed\b"),
    (MemoryType.constraint, r"\bcan only\b|\bonly allowed\b"),
    (MemoryType.procedure, r"\bfirst\b.*\bthen\b|\bstep (?:\d|one)|step-by-step|\bhow to\b"),
    (MemoryType.failure_pattern, r"\b(?:mistakes?|fail(?:ed|s|ure)?|lessons?)\b"),
    (MemoryType.failure_pattern, r"\bshould(?:n't)? have\b|\bshould've\b"),
    (MemoryType.tool_affordance, rf"\b{_TOOL}s?\b.*\b(?:can|lets|supports?|allows?)\b"),
]


_SOURCE_ROLES: dict[Role, SourceRole] = {Role.user: "user", Role.assistant: "assistant"}


@dataclass(frozen=True)
class _Scope:
    """What the sentence rules need to know about the whole segment."""

    base: datetime | None  # the session date, naive
    speakers: frozenset[str]
    known: frozenset[str]  # speakers, and words seen capitalized mid-sentence
    freq: Counter[str]  # content-word counts, for tags
    first: dict[str, int]  # content word -> first position in the segment


def encode_extractive(segment: Segment, reference_context: str = "") -> EncodedSegment:
    """One record per informative sentence of each turn; filler and questions are skipped,
    but for what a question says its speaker prefers before it asks, or who they are.

    An image caption becomes its own record ("<Speaker> shared an image of ..."): what was
    shown is often what is later asked about, and the raw turn carries it too.
    """
    del reference_context  # never a source of facts, and no alias resolution here
    turns = [
        (tid, t)
        for ex in segment.exchanges
        for tid, t in zip(ex.turn_ids, ex.turns, strict=True)
        if t.memory  # as `segment_turns` reads them
    ]
    speakers = list(dict.fromkeys(t.speaker for _, t in turns if t.speaker))
    assistants = {t.speaker for _, t in turns if t.speaker and t.role is Role.assistant}
    bodies = [_prose(t.content) for _, t in turns]
    mid = {w for body in bodies for s in _sentences(body) for w in _mid_words(s)}
    words = [w for body in bodies for w in _words(body, set(speakers))]
    first: dict[str, int] = {}
    for i, w in enumerate(words):
        first.setdefault(w, i)
    base = segment.session_date.replace(tzinfo=None) if segment.session_date else None
    scope = _Scope(base, frozenset(speakers), frozenset(mid | set(speakers)), Counter(words), first)
    records: dict[str, MemoryRecord] = {}
    for i, ((tid, turn), body) in enumerate(zip(turns, bodies, strict=True)):
        role = _SOURCE_ROLES.get(turn.role, "")
        who, caption = turn.speaker or turn.role.value, (turn.image_caption or "").strip()
        before = turns[i - 1][1].speaker if i > 0 else None
        persons = persons_of(who, bool(turn.speaker), body, speakers, before, _CAP_STOP, assistants)
        around = (bodies[i - 1] if i > 0 else "", bodies[i + 1] if i + 1 < len(bodies) else "")
        drafts = _drafts(persons, bool(turn.speaker), body, caption, scope)
        if turn.role is Role.assistant:
            drafts = [
                d
                for d in drafts
                if _COMMITMENT.search(d.source) and not _ANNOUNCES.search(d.source)
            ][:MAX_ASSISTANT_RECORDS]
        for d in drafts:
            rec = build_record(
                segment,
                d.kind,
                d.text,
                [tid],
                entities=d.entities,
                tags=d.tags,
                temporal=Temporal(t_ref=d.t_ref),
                source_role=role,
                context=subject_context(d.text, around, scope, d.antecedent),
            )
            seen = records.setdefault(rec.record_id, rec)  # the same statement twice: one record
            evidence = list(dict.fromkeys([*seen.evidence, tid]))
            records[rec.record_id] = seen.model_copy(update={"evidence": evidence})
    return EncodedSegment(list(records.values()), _context(speakers, base))


@dataclass(frozen=True)
class _Draft:
    """One statement of a turn before it becomes a record."""

    kind: MemoryType
    text: str
    entities: list[str]
    tags: list[str]
    t_ref: str = ""
    antecedent: list[str] = field(default_factory=list)  # what "he", "it", "them" may be
    source: str = ""  # the sentence as the turn says it


def _drafts(persons: Persons, named: bool, body: str, caption: str, scope: _Scope) -> list[_Draft]:
    """A draft for each kept sentence of one turn, then one for its image."""
    subject = persons.me
    speaker = [subject] if named else []
    out: list[_Draft] = []
    recent: list[str] = []  # the names of the turn's latest sentence that names something
    for sentence in _sentences(body):
        greeted = _GREETING.sub("", sentence)
        called = greeted != sentence and _NAME_ONLY.fullmatch(greeted)
        sentence = greeted
        before, own = recent, _entities(sentence, scope.known)
        if names := [e for e in own if e not in scope.speakers]:
            recent = names
        for said in _statements(sentence):
            if called or _is_filler(said, scope):
                continue
            text, t_ref = resolve_dates(said, scope.base)
            text = _uncalled(_capitalize(PRONOUN.sub(lambda m: pronoun(m, persons), text)))[
                :SEMANTIC_TEXT_MAX_CHARS
            ]
            named_here = own if said == sentence else _entities(said, scope.known)
            entities = (speaker + named_here)[:MAX_ENTITIES]
            kind = _memory_type(said, t_ref)
            antecedent = before if _THIRD_PERSON.search(said) else []
            out.append(_Draft(kind, text, entities, _tags(said, scope), t_ref, antecedent, said))
    shown = caption.rstrip(".")
    if shown:
        lead = _CAPTION_LEAD.match(shown)
        phrase = f"an image of {shown[lead.end() :]}" if lead else f"an image: {shown}"
        text = _capitalize(f"{subject} shared {phrase}.")
        out.append(_Draft(MemoryType.fact, text, speaker, _tags(shown, scope)))
    return out


def subject_context(
    text: str, around: tuple[str, str], scope: _Scope, antecedent: Sequence[str] = ()
) -> str:
    """What the neighbouring turns name that the record does not: its subject, for search.

    First what a third-person pronoun of the record may stand for (the names of the turn's
    sentence before it: "And Biscuit survived! Mrs. Lee walked him" gives "Biscuit"), then names
    (capitalized spans, quoted titles) of the turn before and after, then the content words
    of a question just before ("What did you paint?" gives "paint" to the answer); speakers
    and what the record already says are left out.
    """
    said = text.lower()
    names = [
        e
        for e in [
            *antecedent,
            *(e for body in around for s in _sentences(body) for e in _entities(s, scope.known)),
        ]
        if e not in scope.speakers and e.lower() not in said
    ]
    asked = " ".join(q for q in _sentences(around[0]) if _is_question(q))
    words = [w for w in _words(asked, scope.speakers) if w not in said]
    kept: dict[str, str] = {}
    for term in [*names[:MAX_CONTEXT_NAMES], *words[:MAX_CONTEXT_WORDS]]:
        kept.setdefault(term.lower(), term)
    return ", ".join(kept.values())[:CONTEXT_MAX_CHARS]


def _prose(content: str) -> str:
    """What of a turn holds sentences: its prose and list items, without code blocks, tables
    and headings (a plain message is all prose)."""
    prose = (_ITEM_MARK.sub("", content[a:b]) for a, b in prose_spans(content))
    return "\n".join(_STRONG.sub(r"\1", p) for p in prose)


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def _is_question(sentence: str) -> bool:
    return sentence.rstrip("\"”')").endswith("?")


def _preferred(question: str) -> str:
    """What a question says its speaker prefers before it asks ("I prefer short answers, so
    can you ...?" tells "I prefer short answers."); empty otherwise."""
    m = _ASKED.search(question)
    told = question[: m.start()].strip() if m else ""
    low = told.lower().replace("’", "'")
    return f"{told}." if _FIRST_PERSON.match(low) and _PREFERENCE.search(low) else ""


def _statements(sentence: str) -> list[str]:
    """What a sentence states: itself; for a question, what it says its speaker prefers or
    is before it asks; and who the speaker is once more alone when a long sentence says it
    in passing (a role at the end of a paragraph-long request is lost in its vector)."""
    if not sentence:
        return []
    if _is_question(sentence):
        return [_preferred(sentence) or _described(sentence) or sentence]
    role = _described(sentence)
    return [sentence, role] if role and 2 * len(role) < len(sentence) else [sentence]


def _described(sentence: str) -> str:
    """Who a sentence says its speaker is ("... for my career as a baker from Lyon?"
    tells "I am a baker from Lyon."); empty otherwise."""
    found = _ROLE.search(sentence)
    return f"I am {found.group('role')}." if found else ""


def _is_filler(sentence: str, scope: _Scope) -> bool:
    """Questions, sentences that introduce what follows them (a colon: "Here's my code:"),
    sentences made only of acknowledgement words, and sentences naming nothing that are
    short or have fewer than two content words."""
    if _is_question(sentence) or sentence.endswith(":"):  # a colon introduces what follows
        return True
    sentence = _CALLED_LAST.sub(r"\2", sentence)
    sentence = _CALLED_FIRST.sub(lambda m: m[0] if m[1].lower() in _FILLER else "", sentence)
    said = re.findall(r"[\w'’]+", sentence)
    words = [w.lower() for w in said]
    lowered = {s.lower() for s in scope.speakers}
    if all(w in _FILLER or w in lowered for w in words):
        return True
    if (
        said
        and said[0].lower() in _SALUTE
        and all(w[0].isupper() or w.lower() in _SALUTE for w in said)
    ):
        return True
    names = [e for e in _entities(sentence, scope.known) if e not in scope.speakers]
    if sentence.endswith("!") and len(words) < MIN_WORDS:
        return True  # "Oslo!", "Biscuit!": an exclamation, whatever it names
    if names or re.search(r"\d", sentence) or says_when(sentence):
        return False  # "The demo day is next Friday.": a date is what it says
    if len(words) < MIN_WORDS:
        return not _says_who(sentence)
    # an acknowledgement or exclamation ("Ha, no backing out now!") is about no one and
    # has one content word at most; "I've been painting a lot" is about the speaker
    content = [w for w in _words(sentence, scope.speakers) if w not in _FILLER]
    return len(content) < MIN_CONTENT_WORDS and not PRONOUN.search(sentence)


def _says_who(sentence: str) -> bool:
    """A short sentence that says who or what the speaker is, lastingly: "I'm vegetarian."."""
    found = _SELF_IS.fullmatch(sentence.strip())
    word = found[1].lower() if found else ""
    return bool(word) and word not in _NOT_WHO and not word.endswith("ly")


def _uncalled(text: str) -> str:
    """Without a name called that the sentence names again once "you" is written as that
    name: "Lea, Lea is doing great" reads "Lea is doing great"; "Lea, sounds like a great
    parade" keeps it, the only word saying whose parade."""
    for called, keep in ((_CALLED_FIRST, ""), (_CALLED_LAST, r"\2")):
        if (m := called.search(text)) and re.search(
            rf"(?<!\w){re.escape(m[1])}(?!\w)", text[: m.start()] + text[m.end() :]
        ):
            text = _capitalize(m.expand(keep).join((text[: m.start()], text[m.end() :])))
    return text


def _capitalize(text: str) -> str:
    return text[:1].upper() + text[1:]


def _mid_words(sentence: str) -> list[str]:
    """Capitalized words past a sentence's first word: names, as far as case tells."""
    spans = (m.group().split() for m in _CAP_SPAN.finditer(sentence) if m.start() > 0)
    return [re.sub(r"['’]s?$", "", w) for span in spans for w in span]


def _entities(sentence: str, known: Set[str]) -> list[str]:
    """Quoted titles, then capitalized spans not inside one, first seen first.

    A sentence's first word is capitalized anyway, so it counts only when it is a title or
    an initial, a speaker, or a word seen capitalized mid-sentence somewhere in the segment.
    """
    found = [q.strip() for q in _QUOTED.findall(sentence) if q.strip()]
    for m in _CAP_SPAN.finditer(sentence):
        words = [re.sub(r"['’]s?$", "", w) for w in m.group().split()]
        if m.start() == 0 and words[0] not in known and not words[0].endswith("."):
            words = words[1:]
        while words and words[0] in _CAP_STOP:
            words = words[1:]
        while words and words[-1] in _CAP_STOP:
            words = words[:-1]
        span = " ".join(words)
        if span and not any(span in q for q in found):
            found.append(span)
    return list(dict.fromkeys(found))


def _words(text: str, speakers: Set[str]) -> list[str]:
    """Content words: lowercase, 4+ letters, no stopword, number, date word or speaker name."""
    skip = TAG_STOPWORDS | _CALENDAR | NUMBER_WORDS.keys() | {s.lower() for s in speakers}
    words = (re.sub(r"['’]s$", "", w) for w in _WORD.findall(text.lower()))
    return [w for w in words if len(w) >= 4 and w.isalpha() and w not in skip]


def _tags(text: str, scope: _Scope) -> list[str]:
    """The sentence's content words most frequent in the segment (ties: seen first)."""
    words = set(_words(text, scope.speakers))
    rank = {w: (-scope.freq[w], scope.first.get(w, len(scope.first)), w) for w in words}
    return sorted(words, key=rank.__getitem__)[:MAX_TAGS]


def _memory_type(sentence: str, t_ref: str) -> MemoryType:
    """A standing instruction first, then preference cues, then a date makes an event, then
    the first rule that fires."""
    low = sentence.lower().replace("’", "'")
    if _STANDING.search(low):
        return MemoryType.constraint
    if _PREFERENCE.search(low):
        return MemoryType.preference
    if t_ref:
        return MemoryType.event
    return next((kind for kind, rule in _TYPE_RULES if re.search(rule, low)), MemoryType.fact)


def _context(speakers: list[str], base: datetime | None) -> str:
    """Speakers and session date; aliases are left to the LLM encoder (no reliable rule)."""
    parts = [f"Speakers: {', '.join(speakers)}."] if speakers else []
    if base is not None:
        parts.append(f"Session date: {base.date().isoformat()}.")
    return " ".join(parts)[:DISAMBIGUATION_MAX_CHARS]
