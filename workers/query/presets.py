"""Named presets of the query path: the served default and each retrieval ablation.

A preset says which stages a request runs and with which constants. `QueryService` resolves
a request's preset once (the one its `ablation` names, else the service's default) and then
reads its fields; the stages take the values as arguments. An ablation is the served preset
with switches turned off (the paper's Table 5, then one per evidence-node type, which says
what that type's rows add to recall and so whether they earn their embeddings); its
constants are the served ones. Requests and `LYCHEE_QUERY_ABLATION` name an ablation by its
`schemas.query.Ablation` name (`ABLATIONS`).

The constants below were chosen on the LoCoMo dev split, most with each conversation held
back in turn (the value the other four preferred); docs/decisions.md gives each one's reason
and figures, docs/bench/README.md the runs.
The design's own constants (reciprocal-rank fusion's kappa of 60, the fusion weights, the
question-type boost, the recall budgets) stay with the code that applies them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from schemas.query import Ablation
from schemas.records import NodeType


@dataclass(frozen=True)
class Lead:
    """How the second stage reorders selection's choice: at most `items` candidates, its
    most likely ones with at least `log_odds`, go first; the rest keep selection's order."""

    items: int
    log_odds: float


@dataclass(frozen=True)
class Near:
    """Conversation locality after selection (`workers.query.locality.near_first`): an item
    with a turn within `radius` exchanges of a turn of the first `top` items (same session)
    moves `bonus` places up."""

    top: int
    radius: int
    bonus: int


@dataclass(frozen=True)
class WithAssistant:
    """What changes when the conversation is a user's with an assistant (the request's raw
    turns include an assistant's): the user's own words carry what is asked about, and an
    assistant's long reply is context, not the answer."""

    # how much each channel's list counts in a route's fusion (a channel not named: 1)
    channel_weights: tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class QueryPreset:
    """What the query path runs, and with which constants (`SERVED` says why each value)."""

    # the stages: an ablation switches some off
    planner: bool  # plan routes from the question; off: one route, the question alone
    fusion: bool  # fuse routes and select; off: every candidate by its best raw channel score
    rerank: bool  # a configured cross-encoder reranks each route's head
    second_stage: bool  # a configured second-stage scorer leads selection's choice
    bridge: bool  # a later part of a coordinated question searched with the earlier answer
    record_vector_only: bool  # recall is records by vector search, nothing else
    history_by_session: bool  # a question about the whole history: a route per session
    skip_nodes: frozenset[NodeType]  # evidence-node types left out of recall
    # the constants chosen on data
    head: int
    head_kappa: int
    diversity_lambda: float
    pool_factor: int
    said_boost: float
    turn_credit: float
    turn_credit_head: float
    aside: float
    near: Near
    lead: Lead
    led_pool: int
    instruction_cosine: float  # 0: off (`workers.query.instructions`)
    common_share: float  # 0: off (`workers.query.distinct`)
    with_assistant: WithAssistant | None  # None: every conversation alike


SERVED = QueryPreset(
    planner=True,
    fusion=True,
    rerank=True,
    second_stage=True,
    bridge=True,
    record_vector_only=False,
    history_by_session=True,
    skip_nodes=frozenset(),
    # The first `head` items come from the same fusion with kappa `head_kappa`, where an item
    # at the top of a few lists beats one halfway down many; the rest keep kappa 60's order,
    # whose agreement across lists finds more of the evidence within a token budget.
    head=10,
    head_kappa=10,
    # Selection's greedy step `λ·relevance − (1 − λ)·similarity`: the design's 0.75 keeps
    # fewer gold turns within 1,000 tokens (with the query adapter held back).
    diversity_lambda=0.85,
    # Selection reads the first pool_factor·k fused items; 5 recalls within noise of 3, and
    # is slower.
    pool_factor=3,
    # A candidate said on a day the question's dates name ("What did Ana cook on 3 May?" asks
    # about what was said that day, too) is multiplied by this in its route's fusion; chosen
    # from 1.15 to 10, conversations held back.
    said_boost=4.0,
    # A record gains this share of the best fused score of a raw turn or window of its turn in
    # the same route (`turn_credit_head`: in the head's fusion): a statement whose turn the raw
    # turns find too. Conversations held back.
    turn_credit=0.7,
    turn_credit_head=0.15,
    # When every route is about a person, an item none of whose turns that person said loses
    # this much relevance (which selection min-max scales to [0, 1] over its pool): the other
    # speaker's replies ("That sounds fun, Lea!") stop taking the asked person's places.
    # Conversations held back.
    aside=0.3,
    # Evidence often sits a turn or two after the best items: a grid of bonus (3-30), radius
    # (1-3) and anchors (1-3), conversations held back.
    near=Near(top=3, radius=2, bonus=20),
    # The second stage moves its most likely items of selection's choice to the front; the
    # lead is fitted with the scorer's weights (`tests.evals.fit_scorer`: 1-4 items at
    # log-odds -3 to -1, for recall@10 plus recall at 1,000 tokens, no category lower).
    lead=Lead(items=1, log_odds=-3.0),
    # How much of selection's choice the lead and the locality read (selection picks this
    # many when k is smaller): 50 and 100 recall within noise of 30 at k = 10, and are slower.
    # A record's place goes to the turn that shows it among as many (`workers.query.shown`).
    led_pool=30,
    # A user's standing instruction whose scope ("when I ask about file operations") is at
    # least this near the question (cosine) takes a place among the reply's first items.
    # Chosen from 0.2 to 0.5 with each BEAM dev conversation held back (docs/decisions.md);
    # LoCoMo dev holds no such instruction.
    instruction_cosine=0.4,
    # A question about the whole history also searches its topic without the words at least
    # this share of the namespace's turns hold. Chosen from 0.3 to 0.7 with each BEAM dev
    # conversation held back (docs/decisions.md); LoCoMo dev's replies do not move.
    common_share=0.5,
    # In a user's conversation with an assistant, records and evidence nodes (sentences of
    # the user's messages, an assistant's commitments) count half of what raw turns count:
    # the user's turns are short and carry the facts whole. Chosen from 1, 0.75, 0.5, 0.35,
    # 0.25 and 0.1 with each BEAM dev conversation held back (`tests.evals.held_back` over one
    # recall_probe dump per value; 0.5 in all ten folds); every question type stays above
    # raw-turn search.
    with_assistant=WithAssistant(
        channel_weights=(
            ("node_vector", 0.5),
            ("node_text", 0.5),
            ("record_vector", 0.5),
            ("record_text", 0.5),
        ),
    ),
)

# Each ablation is SERVED with its switches off; every ablation also leaves question
# bridging off. Without the planner or with records alone, no topic searched again either.
RECORD_VECTOR_ONLY = replace(SERVED, record_vector_only=True, bridge=False, common_share=0.0)
NO_PLANNER = replace(SERVED, planner=False, bridge=False, common_share=0.0)
NO_FUSION = replace(SERVED, fusion=False, rerank=False, second_stage=False, bridge=False)
NO_ENTITY_NODES = replace(SERVED, skip_nodes=frozenset({NodeType.entity}), bridge=False)
NO_TOPIC_NODES = replace(SERVED, skip_nodes=frozenset({NodeType.topic}), bridge=False)
NO_ENTITY_TOPIC_NODES = replace(SERVED, skip_nodes=frozenset({NodeType.entity_topic}), bridge=False)
NO_TEMPORAL_NODES = replace(SERVED, skip_nodes=frozenset({NodeType.temporal}), bridge=False)
NO_EVENT_FRAME_NODES = replace(SERVED, skip_nodes=frozenset({NodeType.event_frame}), bridge=False)

ABLATIONS: Mapping[Ablation, QueryPreset] = {
    "record-vector-only": RECORD_VECTOR_ONLY,
    "no-planner": NO_PLANNER,
    "no-fusion": NO_FUSION,
    "no-entity-nodes": NO_ENTITY_NODES,
    "no-topic-nodes": NO_TOPIC_NODES,
    "no-entity-topic-nodes": NO_ENTITY_TOPIC_NODES,
    "no-temporal-nodes": NO_TEMPORAL_NODES,
    "no-event-frame-nodes": NO_EVENT_FRAME_NODES,
}


def preset_for(ablation: Ablation | None) -> QueryPreset:
    """The preset an ablation name chooses; SERVED for none."""
    return SERVED if ablation is None else ABLATIONS[ablation]
