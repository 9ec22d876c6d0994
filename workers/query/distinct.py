"""A question about the whole history, searched also without the words most turns hold.

"Over our chats, in what order did the checkout and the newsletter of my bakery website
come up?", in a conversation about building that website: "website" is in most of its
turns, so the topic's vector leans toward every turn at once, and the words that tell the
asked-about turns apart ("checkout", "newsletter") weigh little in it. Each route of such a
question also searches its topic (the route's second query: the heuristic planner's topic of
the question, an LLM planner's first rewrite) without the words that at least the query
preset's `common_share` of the namespace's turns hold (as its full-text index counts them),
when words are left and some were taken away. A namespace not held in memory is searched as
planned.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from schemas.plan import MAX_ROUTE_QUERIES, Plan, Route

_WORD = re.compile(r"[\w'’-]+")

# the share of a namespace's turns that hold each word; None when it is not held in memory
Shares = Callable[[Sequence[str]], Mapping[str, float] | None]


def without_common(plan: Plan, shares: Shares, at_least: float) -> Plan:
    """`plan` with each route's topic (its second query; its first when it has only one)
    also searched without the words at least `at_least` of the turns hold."""
    routes: list[Route] = []
    for route in plan.routes:
        topic = route.queries[1] if len(route.queries) > 1 else route.queries[0]
        words = _WORD.findall(topic)
        share = shares(words)
        if share is None:
            return plan
        kept = [w for w in words if share[w] < at_least]
        query = " ".join(kept)
        if (
            0 < len(kept) < len(words)
            and query not in route.queries
            and len(route.queries) < MAX_ROUTE_QUERIES
        ):
            route = route.model_copy(update={"queries": [*route.queries, query]})
        routes.append(route)
    return plan.model_copy(update={"routes": routes})
