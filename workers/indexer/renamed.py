"""The `name-change` rule: a later statement that one named thing gave way to another ("we
switched from Flask to FastAPI", "moved off Heroku", "replaced Jenkins with GitHub Actions",
"FastAPI instead of Flask", "we no longer use Trello") supersedes the earlier statement
of the same side that names the old thing and not the new one (`_name_changes` says which).

Values (`workers.indexer.values`) are numbers, amounts and days; a tool, a host, a place
or a provider that changes is a name, and without this rule its old statement comes back
unmarked ("Our API is written in Flask" beside the switch). A name is what the words say
is one: capitalized ("Flask", "GitHub Actions", "Fly.io") and not a function word or a
month; the change is said by its verb ("switched", "migrated", "moved off", "replaced ...
with") or "instead of". The earlier statement must state how things stood, not ask, plan
or weigh ("can you help me set up Flask" is not having set it up), and only one is linked: the
statement the change replaces, not every mention of the name.

English function words only: no names, projects or topics.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from workers.indexer.values import NOT_NAMES
from workers.vocabulary import month_number

# a name: one to three capitalized words or tokens ("Fly.io", "GitHub Actions", "C#")
_NAME = r"[A-Z][\w.+#-]*[\w+#](?:\s+[A-Z][\w.+#-]*[\w+#]){0,2}|[A-Z]"
_OLD, _NEW = rf"(?P<old>{_NAME})", rf"(?P<new>{_NAME})"
_CHANGE_VERB = (
    r"(?i:switched|switching|moved|moving|migrated|migrating|changed|transitioned|ported"
    r"|upgraded|downgraded|went)"
)
_FROM = rf"\b{_CHANGE_VERB}\s+(?:[\w'’-]+\s+){{0,4}}?(?i:from)\s+{_OLD}"
_CHANGES = [
    re.compile(_FROM + rf"\s+(?i:(?:over\s+)?to)\s+{_NEW}"),
    re.compile(
        rf"\b(?i:replac(?:ed|ing)|swap(?:ped|ping)|trad(?:ed|ing))\s+{_OLD}\s+(?i:with|for)\s+{_NEW}"
    ),
    re.compile(rf"\b{_NEW},?\s+(?i:instead of|rather than|in place of)\s+{_OLD}"),
    re.compile(rf"\b(?i:moved|migrated|switched)\s+(?i:away\s+from|off(?:\s+of)?)\s+{_OLD}"),
    re.compile(rf"\b(?i:no longer|stopped)\s+(?i:use|using|uses|on|with)\s+{_OLD}"),
    re.compile(rf"\b(?i:dropped|ditched|abandoned|retired|left)\s+{_OLD}\s+(?i:for)\s+{_NEW}"),
]
# a statement that asks, tries, plans or weighs: it does not say how things stand
_NOT_STATED = re.compile(
    r"\?|\b(?:try|trying|help|can you|could you|would|wondering|want|wants|not sure|trouble"
    r"|struggling|considering|thinking about|should|whether|if|how|plan|planning|going to"
    r"|will|compare|comparing|versus|vs)\b",
    re.IGNORECASE,
)
MAX_CHARS = 600  # a longer record is a pasted request: read by neither side


@dataclass(frozen=True)
class Renaming:
    old: str
    new: str | None  # None: only what was left is said ("moved off Heroku")


def renamings(text: str) -> list[Renaming]:
    """The named things a statement says gave way to others."""
    if len(text) > MAX_CHARS:
        return []
    out = []
    for pattern in _CHANGES:
        for m in pattern.finditer(text):
            groups = m.groupdict()
            old, new = _name(groups["old"]), _name(groups.get("new"))
            if old is not None and old != new and (new is not None or "new" not in groups):
                out.append(Renaming(old, new))
    return out


def names(text: str, name: str) -> bool:
    """Whether `text` names `name` as a whole word, as written."""
    return re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-]|\.\w)", text) is not None


def stated(text: str) -> bool:
    """A statement of how things stand: short enough to be one, not asking or weighing."""
    return len(text) <= MAX_CHARS and not _NOT_STATED.search(text)


def _name(found: str | None) -> str | None:
    """The name as said, without a leading function word ("The"); None when none is left."""
    if found is None:
        return None
    words = found.split()
    while words and (words[0].lower() in NOT_NAMES or month_number(words[0].lower())):
        words = words[1:]
    return " ".join(words) or None
