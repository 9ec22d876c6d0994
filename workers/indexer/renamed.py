"""What the rules about named things read (their links are `workers.indexer.name_links`'):
which named thing a statement says gave way to another (`name-change`: "we switched from
Flask to FastAPI", "moved off Heroku", "replaced Jenkins with GitHub Actions", "we host it
on Fly.io instead of Heroku", "we no longer use Trello"), and what its speaker's side does
with a name, said to hold now or not (`now-named`: "I now work at Globex").

Values (`workers.indexer.values`) are numbers, amounts and days; a tool, a host, a place
or a provider that changes is a name, and without this rule its old statement comes back
unmarked ("Our API is written in Flask" beside the switch). A name is what the words say
is one: capitalized ("Flask", "GitHub Actions", "Fly.io", "New York City"), not a
determiner or a month. The change is said by its verb, done by the speaker: nothing but
"I", "we", the speaker's name (an encoder writes it for "I") and a few adverbs may stand
before the verb in its clause, so a plan ("thinking about switching"), a denial ("we never
switched"), a condition ("if we moved off") or someone else's change ("my brother
switched") says nothing of how things stand for the speaker. A name followed by what it
owns or qualifies ("Heroku's free tier", "Slack notifications") is a part of it that went,
not the thing.

English function words only: no names, projects or topics.
"""

from __future__ import annotations

import re
from collections.abc import Container
from dataclasses import dataclass

from workers.indexer.values import CLAUSE_END, NOT_NAMES, WORD
from workers.vocabulary import month_number, wordset

# a name: one to three capitalized words or tokens ("Fly.io", "GitHub Actions", "C#")
_NAME = r"[A-Z][\w.+#-]*[\w+#](?:\s+[A-Z][\w.+#-]*[\w+#]){0,2}|[A-Z]"
_OLD, _NEW = rf"(?P<old>{_NAME})", rf"(?P<new>{_NAME})"
_VERB = (
    r"(?P<verb>(?i:switched|switching|moved|moving|migrated|migrating|changed|transitioned"
    r"|ported|upgraded|downgraded))"
)
# ... and the verbs of using something, before "Y instead of X"
_USING = (
    r"(?P<verb>(?i:use|uses|used|using|run|runs|running|host|hosts|hosted|hosting|chose"
    r"|picked|rely on|relies on|built on|build on|went with|go with))"
)
_CHANGES = [
    re.compile(
        rf"\b{_VERB}\s+(?:[\w'’-]+\s+){{0,4}}?(?i:from)\s+{_OLD}\s+(?i:(?:over\s+)?to)\s+{_NEW}"
    ),
    re.compile(
        r"\b(?P<verb>(?i:replac(?:ed|ing)|swap(?:ped|ping)|trad(?:ed|ing)))"
        rf"\s+{_OLD}\s+(?i:with|for)\s+{_NEW}"
    ),
    re.compile(
        rf"\b{_USING}\s+(?:[\w'’-]+\s+){{0,3}}?{_NEW},?\s+(?i:instead of|in place of)\s+{_OLD}"
    ),
    re.compile(
        r"\b(?P<verb>(?i:moved|migrated|switched))\s+(?i:away\s+from|off(?:\s+of)?)"
        rf"\s+{_OLD}"
    ),
    re.compile(
        r"\b(?P<verb>(?i:no longer\s+(?:use|using|uses|on|with)|stopped\s+(?:using|use)))"
        rf"\s+{_OLD}"
    ),
    re.compile(rf"\b(?P<verb>(?i:dropped|ditched|abandoned|retired))\s+{_OLD}\s+(?i:for)\s+{_NEW}"),
    # "we dropped Acme and hired Globex", "I quit Acme and joined Globex": one thing let go
    # and another taken for it, each verb with its own partners ("we left Rome and moved to
    # Naples for a week" is a trip)
    re.compile(
        rf"\b(?P<verb>(?i:dropped|ditched|fired|cancell?ed))\s+{_OLD},?\s+(?i:and)\s+"
        r"(?:(?i:we|i)\s+)?(?i:hired|brought in|took on|signed with|signed up with"
        rf"|switched to|started using)\s+{_NEW}"
    ),
    re.compile(
        rf"\b(?P<verb>(?i:quit|left))\s+{_OLD},?\s+(?i:and)\s+(?:(?i:we|i)\s+)?"
        rf"(?i:joined|signed with)\s+{_NEW}"
    ),
]
# what may stand before the verb in its clause: the speaker, and how or when
_SELF = wordset(
    "i we i've we've i'm we're i'd we'd us our ours and others also just finally recently "
    "already then now have has had 've 're am are is was were been officially completely "
    "fully eventually last this week month year today yesterday ago the user"
)
# what may follow the name that ends the change: no part of it, no owner's 's
_AFTER = NOT_NAMES | wordset(
    "last this next month week year ago entirely altogether during earlier"
)
_DETERMINERS = wordset("the a an our my your their his her its this that")
MAX_CHARS = 600  # a longer record is a pasted request: read by neither side
# a statement that asks, tries, plans or weighs: it does not say how things stood
_NOT_STATED = re.compile(
    r"\?|\b(?:try|trying|help|can you|could you|would|wondering|want|wants|not sure|trouble"
    r"|struggling|considering|thinking about|should|whether|if|how|plan|planning|going to"
    r"|will|compare|comparing|versus|vs)\b",
    re.IGNORECASE,
)


# "works at Globex", "is based in Bergen"; "host it on Fly.io" is not read (an object between)
_FRAME = re.compile(
    rf"\b(?P<verb>[a-z][a-z'’]+)\s+(?P<prep>(?i:at|for|in|on|from|via))\s+"
    rf"(?P<name>(?:(?i:the)\s+)?{_NAME})"
)
# doings one does with one thing at a time, as `_stem` gives them: where one works, lives,
# studies, is based, banks, hosts or runs a service; not whom one talks to or what one
# listens to, which add up ("I now talk to Tove" ends no talking to Bob)
_ONE_AT_A_TIME = wordset("work liv stay resid bas locat study intern bank host run")
# beside "now", a thing added, not one that replaced another ("I now also work at ...",
# "I now work at Globex too")
_ADDED = wordset("also too additionally even still")
_ADDED_AFTER = re.compile(r"[^.;!?]*\b(?:too|as well|also)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Renaming:
    old: str
    new: str | None  # None: only what was left is said ("moved off Heroku")


def renamings(text: str, speakers: Container[str] | None = None) -> list[Renaming]:
    """The named things a statement says its speaker's side gave way to others; `speakers`:
    the namespace's speaker names, lowercased (an encoder writes one for "I"); None: whoever
    it says made the change (whether a record is worth linking at all)."""
    if len(text) > MAX_CHARS:
        return []
    out = []
    for pattern in _CHANGES:
        for m in pattern.finditer(text):
            groups = m.groupdict()
            old, new = _name(groups["old"]), _name(groups.get("new"))
            if old is None or old == new or ("new" in groups and new is None):
                continue
            by = speakers is None or _by_the_speaker(text[: m.start("verb")], speakers)
            if by and _whole(text[m.end() :]):
                out.append(Renaming(old, new))
    return out


@dataclass(frozen=True)
class Frame:
    """What a statement says its speaker's side does with a name: "works at" Globex."""

    verb: str  # its stem: "work" for "works", "worked", "working"
    prep: str
    name: str
    now: bool  # said as what holds now ("I now work at ...", "Now we host on ...")


def frames(text: str, speakers: Container[str] | None) -> list[Frame]:
    """The named things a statement says its speaker's side does something with, after a
    preposition; only the speaker (`speakers`, lowercased; None: anyone) and how or when
    stand before the verb in its clause."""
    if not stated(text):
        return []
    out = []
    for m in _FRAME.finditer(text):
        verb, name = _stem(m["verb"].lower()), _name(m["name"])
        before = CLAUSE_END.split(text[: m.start("verb")])[-1].lower().replace("’", "'")
        said = WORD.findall(before)
        by = speakers is None or _by_the_speaker(before, speakers)
        if name is None or verb not in _ONE_AT_A_TIME or not by:
            continue
        after = text[m.end() :]
        if not _whole(after):
            continue
        now = "now" in said and not _ADDED & set(said) and not _ADDED_AFTER.match(after)
        out.append(Frame(verb, m["prep"].lower(), name, now))
    return out


def _stem(verb: str) -> str:
    """ "work" of "works", "worked", "working"; "liv" of "live", "lived", "living"; "study"
    of "studies", "studied"."""
    if verb.endswith(("ies", "ied")) and len(verb) > 4:
        return verb[:-3] + "y"
    for suffix in ("ing", "ed", "es", "s"):
        if verb.endswith(suffix) and len(verb) - len(suffix) >= 2 and not verb.endswith("ss"):
            verb = verb[: -len(suffix)]
            break
    if len(verb) > 3 and verb[-1] == verb[-2]:  # "running" -> "runn" -> "run"
        verb = verb[:-1]
    return verb.removesuffix("e")


def names(text: str, name: str) -> bool:
    """Whether `text` names `name` as a whole word, as written."""
    return re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-]|\.\w)", text) is not None


def stated(text: str) -> bool:
    """A statement of how things stand: short enough to be one, not asking or weighing."""
    return len(text) <= MAX_CHARS and not _NOT_STATED.search(text)


def _by_the_speaker(before: str, speakers: Container[str]) -> bool:
    """Nothing but the speaker and how or when stands before the verb in its clause."""
    clause = CLAUSE_END.split(before)[-1].lower().replace("’", "'")
    return all(w in _SELF or w.removesuffix("'s") in speakers for w in WORD.findall(clause))


def _whole(after: str) -> bool:
    """The name that ends the change is the whole thing: not "Heroku's free tier"."""
    if re.match(r"['’]s\b", after):
        return False
    word = re.match(r"\s+([a-z][\w'’-]*)", after)
    if word is not None and word.group(1) == "during":  # a date the encoder wrote, not a while
        return re.match(r"\s+during the (?:week|month|year) of\b", after) is not None
    return word is None or word.group(1) in _AFTER


def _name(found: str | None) -> str | None:
    """The name as said, without a leading determiner ("The"); None when none is left, or
    when it is a month."""
    if found is None:
        return None
    words = found.split()
    while words and words[0].lower() in _DETERMINERS:
        words = words[1:]
    if len(words) == 1 and month_number(words[0].lower()):
        return None
    return " ".join(words) or None
