"""A user's standing instructions, put in view of the requests they apply to.

A user tells an assistant how they want later answers given ("Always answer with a shell
one-liner first when I ask about file operations"). The request that should follow such an
instruction ("How do I rename every file in a folder?") shares few words with it: the
instruction is about how to answer, the request about what. So recall ranks it far down,
and an agent that asks its memory before answering never sees it.

An instruction names when it applies (its scope: "when I ask about file operations"). The
request is compared with that scope, not with the whole sentence, and the user's
instruction (a constraint record said by the user) whose scope comes nearest, when it is
near enough (the query preset's `instruction_cosine`), takes the place of the weakest item
of the reply's first items. One instruction at most: a reply's places are few and the
nearest scope is the one a request most likely falls under.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from workers.embedding import Embedder, embed_queries
from workers.query.hits import candidate_fields, record_item_id
from workers.query.selection import Candidate, Fused
from workers.store import EvidenceStore

# "... when I ask about X", "... whenever the user asks for X", "... when asking about X":
# the words after it are the instruction's scope
_SCOPE = re.compile(
    r"\bwhen(?:ever)?\s+(?:[\w'’-]+\s+){0,3}?"
    r"(?:ask|asks|asked|asking|inquire|inquires|inquiring|request|requests|requesting)\s+"
    r"(?:(?:me|you|the assistant)\s+)?"
    # "about X", or a kind of question: "when I ask you a data question"
    r"(?:(?:about|for|on|regarding)\s+"
    r"|(?=(?:a|an|any)\s+(?!lot\b|few\b|couple\b|bunch\b|more\b)(?:[\w-]+\s+){1,2}questions?\b))"
    r"(?P<scope>\S.*)",
    re.IGNORECASE | re.DOTALL,
)
# "... for anything about X", "on any question about X"
_FOR_ANY = re.compile(
    r"\b(?:for|on|with)\s+(?:anything|everything|any\s+questions?|any\s+requests?)"
    r"\s+(?:about|on|regarding|related\s+to|to\s+do\s+with)\s+(?P<scope>\S.*)",
    re.IGNORECASE | re.DOTALL,
)
CACHED = 4096  # scope vectors a process keeps, then starts again
CHANNEL = "instruction"  # the cosine of its scope to the request, in the item's scores

# a scope said first: what comes before it ends a clause ("From now on, whenever ...")
_LEAD_END = re.compile(r"[.!?:;,](?:\s*(?:and|so|then|also))?$", re.IGNORECASE)
# a clause after the scope that tells what to do: "... when I ask about X, and keep it short"
_TO_DO = (
    r"(?:give|use|show|include|answer|reply|respond|start|begin|lead|put|provide|write|format"
    r"|always|never|don['’]t|do not|make|keep|list|add|mention|explain|suggest|remind|tell"
    r"|offer|ask|send|cite|stick|avoid|limit|quote)"
)
# a condition after the scope: "on any request about travel before asking me"
_CONDITION = re.compile(r"\s+(?:before|after|unless|except|until)\b", re.IGNORECASE)
_CLAUSE_AFTER = re.compile(
    rf"[,;:]\s*(?=(?:(?:and|then|but|so)\s+)?(?:please\s+)?{_TO_DO}\b)", re.IGNORECASE
)


def scope_of(text: str) -> str | None:
    """What an instruction applies to, as its own words say; None when they do not say. A
    scope said first ends before the clause that follows it, at its last comma ("Whenever I
    ask about X, Y or Z, give me W"); said last, it runs to the end ("Give me W when I ask
    about X, Y or Z") unless a clause that tells what to do follows it (", and keep it
    short")."""
    said = text.strip()
    found = _SCOPE.search(said) or _FOR_ANY.search(said)
    if found is None:
        return None
    scope = found.group("scope")
    before = said[: found.start()].rstrip()
    if not before or _LEAD_END.search(before):
        cut = max(scope.rfind(c) for c in ",;:")
        scope = scope[:cut] if cut > 0 else scope
    scope = _CONDITION.split(_CLAUSE_AFTER.split(scope, maxsplit=1)[0], maxsplit=1)[0]
    return scope.rstrip(" \t\n.!") or None


@dataclass(frozen=True)
class Scoped:
    """A namespace's user instructions that name their scope, with the scopes' unit vectors."""

    rows: list[dict[str, Any]]
    vectors: np.ndarray

    def nearest(self, question: np.ndarray, at_least: float) -> Fused | None:
        """The instruction whose scope is nearest the question, as a reply item, when its
        cosine is at least `at_least`."""
        unit = question / max(float(np.linalg.norm(question)), 1e-12)
        cosines = self.vectors @ unit
        best = int(np.argmax(cosines))
        if cosines[best] < at_least:
            return None
        return _item(self.rows[best], float(cosines[best]))


class StandingInstructions:
    """The user's instructions of a namespace with their scopes' vectors (a per-process
    cache of scope vectors: a namespace holds a few, asked about again and again)."""

    def __init__(self, store: EvidenceStore, embedder: Embedder) -> None:
        self.store = store
        self.embedder = embedder
        self._vectors: dict[str, np.ndarray] = {}

    def of(self, namespace: str) -> Scoped | None:
        """The namespace's scoped instructions, read and embedded once a request (beside its
        plan and question, not in selection); None when it holds none."""
        rows = self.store.records.of_kind(namespace, "constraint", "user")
        scoped = [(row, s) for row in rows if (s := scope_of(row["semantic_text"] or ""))]
        if not scoped:
            return None
        return Scoped([r for r, _ in scoped], self._scope_vectors([s for _, s in scoped]))

    def _scope_vectors(self, scopes: Sequence[str]) -> np.ndarray:
        """Unit vectors of `scopes`, those not cached embedded in one call (read into a
        mapping of the request's own: another request's thread may clear the cache)."""
        found = {s: v for s in scopes if (v := self._vectors.get(s)) is not None}
        missing = [s for s in dict.fromkeys(scopes) if s not in found]
        if missing:
            vectors = np.asarray(embed_queries(self.embedder, missing), dtype=np.float32)
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            new = dict(zip(missing, vectors / np.maximum(norms, 1e-12), strict=True))
            found.update(new)
            if len(self._vectors) > CACHED:
                self._vectors.clear()
            self._vectors.update(new)
        return np.stack([found[s] for s in scopes])


def _item(row: dict[str, Any], cosine: float) -> Fused:
    candidate = Candidate(
        item_id=record_item_id(row),
        channel_scores={CHANNEL: round(cosine, 6)},
        **candidate_fields(row),
    )
    return Fused(candidate, rrf=0.0, best=0.0, route_score=0.0, routes=())


def with_instruction(chosen: Sequence[Fused], instruction: Fused, head: int) -> list[Fused]:
    """`chosen` with `instruction` among its first `head` items: in the place of the one
    whose fused score is lowest (never the first, the best evidence found), which moves to
    just after them. Unchanged when the instruction is there already, when the items there
    show its turn, or when `head` leaves no place but the first."""
    top = list(chosen[:head])
    c = instruction.candidate
    shown = {(f.candidate.session_id, t) for f in top for t in f.candidate.turn_ids}
    if head < 2 or all((c.session_id, t) in shown for t in c.turn_ids):
        return list(chosen)
    rest = [f for f in chosen[head:] if f.item_id != instruction.item_id]
    if len(top) < head:
        return [*top, instruction, *rest]
    weakest = min(range(1, len(top)), key=lambda i: top[i].fused)
    return [*top[:weakest], instruction, *top[weakest + 1 :], top[weakest], *rest]
