"""The links of the two rules about named things (their reading is `workers.indexer.renamed`):

- `name-change`: a statement that says its side's named thing gave way to another ("we
  switched from Flask to FastAPI") replaces the earlier statement that said the old one held.
- `now-named`: a statement of what its side does now with a name ("I now work at Globex",
  "we now host on Fly.io") replaces the latest earlier statement of that side doing the
  same with another name ("I work at Acme"): the same verb and preposition, of what one
  does with one thing at a time (`renamed.frames`), and neither statement names the other's
  thing. "Now" is what says the change: "I work at Globex" after "I work at Acme" may be a
  second job, "I now also work at ..." is one.
"""

from __future__ import annotations

from collections.abc import Container, Sequence

from schemas.supersession import LinkKind, Supersession
from workers.indexer.renamed import Frame, frames, names, renamings, stated
from workers.indexer.statements import (
    Statement,
    content_words,
    earlier,
    first_said,
    link,
    said_order,
)


def name_changes(
    namespace: str,
    statements: Sequence[Statement],
    common: frozenset[str],
    speakers: Container[str] | None,
) -> list[Supersession]:
    """Each statement that says its side's named thing gave way to another, with the
    earlier statement of that side that said the old one held: the one that shares the most
    words with the change besides the two names ("Our API is written in Flask" for "switched
    from Flask to FastAPI for the API"), else the first that named it, which introduced it
    (later mentions are in passing)."""
    changes = [renamings(s.text, speakers) for s in statements]
    if not any(changes):
        return []
    # read once, not once per change and statement
    holds = [stated(s.text) for s in statements]
    words = [content_words(s.text) for s in statements]
    out = []
    for newer, found, said in zip(statements, changes, words, strict=True):
        for change in found:
            around = said - content_words(f"{change.old} {change.new or ''}") - common
            olders = [
                (len(words[i] & around), first_said(s), i)
                for i, s in enumerate(statements)
                if holds[i]
                and s.role == newer.role
                and earlier(s, newer) is True
                and names(s.text, change.old)
                and not (change.new and names(s.text, change.new))
                and all(r.old != change.old for r in changes[i])
            ]
            if not olders:
                continue
            older = statements[max(olders)[2]]
            then = f"{change.old} then {change.new}" if change.new else f"{change.old} left"
            out.append(link(namespace, LinkKind.supersedes, older, newer, then, "rule:name-change"))
    return out


def now_named(
    namespace: str, statements: Sequence[Statement], speakers: Container[str] | None
) -> list[Supersession]:
    """Each statement of what its side does now with a name, with the latest earlier
    statement of that side doing the same with another name."""
    said = [frames(s.text, speakers) for s in statements]
    out = []
    for newer, found in zip(statements, said, strict=True):
        for now in (f for f in found if f.now):
            olders = [
                (said_order(s), i, f)
                for i, s in enumerate(statements)
                if s.role == newer.role and earlier(s, newer) is True
                for f in said[i]
                if _replaced(f, now, s.text, newer.text)
            ]
            if olders:
                _, i, old = max(olders, key=lambda o: (o[0], o[1]))
                reason = f"{old.name} then {now.name}"
                out.append(
                    link(
                        namespace,
                        LinkKind.supersedes,
                        statements[i],
                        newer,
                        reason,
                        "rule:now-named",
                    )
                )
    return out


def _replaced(old: Frame, now: Frame, old_text: str, new_text: str) -> bool:
    """`old` is what `now` says no longer holds: the same doing, another thing, and neither
    statement names the other's."""
    return (
        (old.verb, old.prep) == (now.verb, now.prep)
        and old.name != now.name
        and not names(old_text, now.name)
        and not names(new_text, old.name)
    )
