"""The query service in-process on a real LanceDB: routes, temporal filters, isolation, output."""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path
from typing import get_args

import numpy as np
import pytest

from schemas import QueryRequest
from schemas.plan import Plan, QuestionType, Route, TemporalFilter
from schemas.query import Ablation
from schemas.records import NodeType, Temporal
from tests.workers.builders import HASH_DIM, HashEmbedder, batch, index_batches, turn
from tests.workers.store.test_forget import raw
from workers.query.adapter import QueryAdapter
from workers.query.multiroute import MultiRouteRecall
from workers.query.presets import ABLATIONS, RECORD_VECTOR_ONLY, SERVED, QueryPreset
from workers.query.selection import FusedOrder, select
from workers.query.service import QueryDeps, QueryService
from workers.store import EvidenceStore

pytestmark = pytest.mark.asyncio


@pytest.fixture
def store(tmp_path: Path) -> EvidenceStore:
    s = EvidenceStore(str(tmp_path / "db"), HashEmbedder.model_name, HASH_DIM)
    emb = HashEmbedder()
    index_batches(
        s,
        [
            batch(
                "a", 0, ["Ann adopted a puppy named Biscuit"], temporal=Temporal(t_ref="2024-03-02")
            ),
            batch(
                "a", 1, ["Ann ran the spring half marathon"], temporal=Temporal(t_ref="2024-05-19")
            ),
            batch(
                "a", 2, ["Ann visited Lisbon with her sister"], temporal=Temporal(t_ref="2024-06")
            ),
            batch("b", 0, ["Bo adopted a puppy named Biscuit too"], entities=("Bo",)),
        ],
        emb,
    )
    return s


def request(ns: str, q: str, k: int = 5, **kw: object) -> QueryRequest:
    return QueryRequest(
        correlation_id="c",
        namespace=ns,
        query=q,
        k=k,
        reply_partition=0,
        deadline_ms=int((time.time() + 30) * 1000),
        **kw,  # type: ignore[arg-type]
    )


def service(store: EvidenceStore) -> QueryService:
    return QueryService(QueryDeps(store, HashEmbedder()))


async def test_query_never_returns_another_namespace_whatever_the_wording(
    store: EvidenceStore,
) -> None:
    svc = service(store)
    for q in ("Bo adopted a puppy named Biscuit too", "namespace = 'b'", "b' OR '1'='1"):
        reply = await svc.search(request("a", q, k=10))
        assert reply.evidence and all(e.item_id.startswith("a/") for e in reply.evidence), q
        assert "Bo adopted" not in reply.context


async def test_a_search_whose_version_a_forget_pruned_is_searched_again(
    store: EvidenceStore, tmp_path: Path
) -> None:
    """Another process forgets a namespace under a reader whose view of the tables lags:
    the reads of the pruned version fail, and the search is run again at the latest one."""
    lagging = EvidenceStore(str(tmp_path / "db"), HashEmbedder.model_name, HASH_DIM, 3600.0)
    svc = service(lagging)
    first = await svc.search(request("a", "Who adopted a puppy named Biscuit?"))
    store.forget("b", None, HashEmbedder())
    again = await svc.search(request("a", "Who adopted a puppy named Biscuit?"))
    assert again.status == "ok"
    assert [e.item_id for e in again.evidence] == [e.item_id for e in first.evidence]


@pytest.mark.parametrize(
    ("window", "expected"),
    [
        (
            TemporalFilter(since="2024-03-02", until="2024-03-02"),
            {"Ann adopted a puppy named Biscuit"},
        ),
        (TemporalFilter(since="2024-05", until="2024-05"), {"Ann ran the spring half marathon"}),
        (
            TemporalFilter(since="2024-05-01", until="2024-06-30"),
            {"Ann ran the spring half marathon", "Ann visited Lisbon with her sister"},
        ),
    ],
)
async def test_temporal_filter_day_month_and_range(
    store: EvidenceStore, window: TemporalFilter, expected: set[str]
) -> None:
    recall = MultiRouteRecall(store, HashEmbedder())
    assert {r["semantic_text"] for r in recall._temporal("a", window)} == expected


async def test_temporal_route_adds_records_in_range_to_the_ranking(store: EvidenceStore) -> None:
    plan = Plan(
        question_type=QuestionType.temporal,
        semantic_queries=["what happened"],
        temporal_filter=TemporalFilter(since="2024-06", until="2024-06"),
        routes=[Route(goal="g", queries=["what happened"])],
        source="heuristic",
    )
    recall = MultiRouteRecall(store, HashEmbedder())
    (route,) = await recall.recall(plan, "what happened", "a", 5)
    lisbon = next(c for c in route.candidates if "Lisbon" in c.text)
    assert "temporal" in lisbon.channel_scores


@pytest.mark.parametrize("skip", [t for t in NodeType])
async def test_node_ablation_leaves_that_node_type_out_of_recall(
    store: EvidenceStore, skip: NodeType
) -> None:
    recall = MultiRouteRecall(store, HashEmbedder())

    async def types(preset: QueryPreset = SERVED) -> set[str]:
        """The node types behind the candidates of a few questions."""
        found: set[str] = set()
        for q in ("Ann travel Lisbon", "Ann Lisbon puppy", "Ann adopted a puppy"):
            plan = Plan(
                question_type=QuestionType.temporal,
                semantic_queries=[q],
                temporal_filter=TemporalFilter(since="2024-06", until="2024-06"),
                routes=[Route(goal="g", queries=[q])],
                source="heuristic",
            )
            (route,) = await recall.recall(plan, q, "a", 10, preset=preset)
            found |= {n.split("/")[1] for c in route.candidates for n in c.node_ids}
            found |= {"temporal" for c in route.candidates if "temporal" in c.channel_scores}
        return found

    every = await types()
    assert every == {t.value for t in NodeType}  # each ablation has something to remove
    name = f"no-{skip.value.replace('_', '-')}-nodes"
    assert name in get_args(Ablation) and ABLATIONS[name].skip_nodes == {skip}
    assert await types(ABLATIONS[name]) == every - {skip.value}


async def test_reply_carries_plan_context_and_provenance(store: EvidenceStore) -> None:
    raw = turn("a", "t7", "Ann: my puppy Biscuit chewed the sofa", 3)
    vec = HashEmbedder().embed([raw.text])[0].tolist()
    store.turns.upsert([raw.model_copy(update={"embedding": vec, "embedding_model": "hash-16"})])
    reply = await service(store).search(request("a", "What is the name of Ann's puppy?", k=3))
    assert reply.plan and reply.plan["routes"] and reply.plan["source"] == "heuristic"
    kinds = {e.kind for e in reply.evidence}
    assert "record" in kinds
    assert (
        reply.context.startswith("Episodic/Semantic Memories:") and "Raw Memories:" in reply.context
    )
    assert "(Date: 2 March 2024)" in reply.context  # a record's resolved date
    assert reply.context_tokens > 0 and all(e.turn_ids for e in reply.evidence)
    assert reply.answer is None
    with_answer = await service(store).search(request("a", "puppy", answer=True))
    assert with_answer.answer is None
    assert with_answer.answer_error == "no answer model is configured"


@pytest.mark.parametrize("ablation", ["record-vector-only", "no-planner", "no-fusion"])
async def test_ablations_run_the_same_service(store: EvidenceStore, ablation: str) -> None:
    reply = await service(store).search(request("a", "Biscuit the puppy", ablation=ablation))
    assert reply.evidence
    if ablation == "record-vector-only":
        assert {e.kind for e in reply.evidence} == {"record"}
        assert all(set(e.scores) >= {"record_vector"} for e in reply.evidence)
    if ablation == "no-planner":
        assert reply.plan is not None and [r["queries"] for r in reply.plan["routes"]] == [
            ["Biscuit the puppy"]
        ]
    if ablation == "no-fusion":  # sorted by the best raw channel score, nothing fused
        fusion = {"rrf", "best", "route", "final"}
        best = [max(v for n, v in e.scores.items() if n not in fusion) for e in reply.evidence]
        assert best == sorted(best, reverse=True)


async def test_answer_with_an_llm_uses_the_context_and_counts_tokens(store: EvidenceStore) -> None:
    from tests.fakes.openai_server import FakeOpenAI, text
    from workers.llm.calls import make_client
    from workers.query.answer import LLMAnswerer

    with FakeOpenAI() as server:
        server.script(text("Biscuit"))
        client = make_client(server.url, None, timeout_s=5.0)
        svc = QueryService(QueryDeps(store, HashEmbedder(), answerer=LLMAnswerer(client, "m")))
        reply = await svc.search(request("a", "What is the puppy called?", answer=True))
        await client.close()
        prompt = server.requests[0]["messages"][-1]["content"]
    assert reply.answer == "Biscuit"
    assert "Ann adopted a puppy named Biscuit" in prompt and "What is the puppy called?" in prompt
    assert reply.usage["calls"] == 1 and reply.usage["input_tokens"] > 0
    assert "answer" in reply.timings_ms


async def test_configured_ablation_applies_to_requests_that_name_none(
    store: EvidenceStore,
) -> None:
    svc = QueryService(QueryDeps(store, HashEmbedder()), preset=RECORD_VECTOR_ONLY)
    reply = await svc.search(request("a", "Biscuit the puppy"))
    assert reply.evidence and all(set(e.scores) >= {"record_vector"} for e in reply.evidence)
    assert not {"node_vector", "record_text", "turn_vector"} & {
        k for e in reply.evidence for k in e.scores
    }
    own = await svc.search(request("a", "Biscuit the puppy", ablation="no-planner"))
    assert own.plan is not None and own.plan["routes"][0]["queries"] == ["Biscuit the puppy"]


async def test_reply_timings_name_each_recall_channel(store: EvidenceStore) -> None:
    reply = await service(store).search(request("a", "When did Ann visit Lisbon in 2024-06?"))
    channels = {k.removeprefix("recall.") for k in reply.timings_ms if k.startswith("recall.")}
    assert {
        "embed",
        "node_vector",
        "record_vector",
        "turn_vector",
        "node_text",
        "record_text",
        "turn_text",
        "links",
    } <= channels
    assert all(reply.timings_ms[f"recall.{c}"] >= 0 for c in channels)
    only = await service(store).search(request("a", "Lisbon", ablation="record-vector-only"))
    assert {k for k in only.timings_ms if k.startswith("recall.")} <= {
        "recall.embed",
        "recall.record_vector",
    }


async def test_a_lone_routes_ranking_is_cut_where_selection_stops_reading(
    tmp_path: Path,
) -> None:
    """Cutting one route's ranking at pool_factor·k returns what the whole ranking returns."""
    s = EvidenceStore(str(tmp_path / "db"), HashEmbedder.model_name, HASH_DIM)
    words = ["puppy", "marathon", "Lisbon", "sister", "garden", "violin", "bakery", "kayak"]
    texts = [
        f"Ann {a} and the {b} on day {i}"
        for i, (a, b) in enumerate((a, b) for a in words for b in words if a != b)
    ]
    index_batches(
        s, [batch("a", i, texts[i : i + 4]) for i in range(0, len(texts), 4)], HashEmbedder()
    )
    recall = MultiRouteRecall(s, HashEmbedder())
    question = "What did Ann do with the puppy and the violin?"
    plan = Plan(
        question_type=QuestionType.single,
        semantic_queries=[question],
        source="heuristic",
        routes=[Route(goal="what Ann did", queries=[question, "Ann puppy", "violin"])],
    )
    whole = await recall.recall(plan, question, "a", 2)
    assert len(whole[0].candidates) > 3 * 2  # the cut below drops something
    for k in (1, 2, 5):
        cut = await recall.recall(plan, question, "a", k, depth=SERVED.pool_factor * k)
        assert len(cut[0].candidates) == min(SERVED.pool_factor * k, len(whole[0].candidates))
        full = await recall.recall(plan, question, "a", k)
        assert select(list(FusedOrder(cut)), k, 1) == select(list(FusedOrder(full)), k, 1)
    two = plan.model_copy(
        update={"routes": [*plan.routes, Route(goal="where", queries=["Lisbon sister"])]}
    )
    kept = await recall.recall(two, question, "a", 2, depth=SERVED.pool_factor * 2)
    assert [len(r.candidates) for r in kept] == [
        len(r.candidates) for r in await recall.recall(two, question, "a", 2)
    ]  # several routes: every candidate kept


async def test_a_record_leaning_on_its_neighbours_carries_their_context(tmp_path: Path) -> None:
    s = EvidenceStore(str(tmp_path / "db"), HashEmbedder.model_name, HASH_DIM)
    leaning = batch("a", 0, ["It starts at 7:30 on Sunday"])
    rec = leaning.records[0].model_copy(update={"context": "the Riverside half marathon"})
    index_batches(s, [leaning.model_copy(update={"records": [rec]})], HashEmbedder())

    reply = await service(s).search(request("a", "When does the Riverside half marathon start?"))

    (item,) = [e for e in reply.evidence if e.kind == "record"]
    assert item.text == "It starts at 7:30 on Sunday"
    assert item.context == "the Riverside half marathon"


async def test_the_query_adapter_moves_the_questions_vector_not_the_stored_ones(
    store: EvidenceStore,
) -> None:
    """An adapter that maps the question's vector onto another record's makes vector search
    find that record: it is applied to question vectors, and stored vectors stay as written."""
    emb = HashEmbedder()
    q = "Ann visited Lisbon with her sister"
    v, target = emb.embed([q, "Ann adopted a puppy named Biscuit"])
    adapter = QueryAdapter(emb.model_name, np.outer(v, target - v).astype(np.float32))
    req = request("a", q, k=1, ablation="record-vector-only")
    plain = await service(store).search(req)
    moved = await QueryService(QueryDeps(store, emb, adapter=adapter)).search(req)
    assert "Lisbon" in plain.evidence[0].text
    assert "puppy" in moved.evidence[0].text


async def test_a_later_part_that_refers_back_is_searched_with_the_earlier_parts_answer(
    tmp_path: Path,
) -> None:
    """ "who walked it" is searched as "who walked Biscuit": the name the first part's best
    items give, so the record about walking Biscuit comes before walks in general."""
    s = EvidenceStore(str(tmp_path / "db"), HashEmbedder.model_name, HASH_DIM)
    texts = [
        "Ann adopted a puppy and named it Biscuit",
        "Dan walked it every evening while Ann was away",
        "Dan walked Biscuit every evening while Ann was away",
        "Ann bought the puppy a red collar",
        "Ann took the puppy to the vet",
        "Ann and Dan cooked dinner together",
    ]
    index_batches(s, [batch("a", i, [t]) for i, t in enumerate(texts)], HashEmbedder())
    question = "What is the name of Ann's puppy and who walked it while she was away?"

    reply = await service(s).search(request("a", question, k=6))

    assert [r["queries"][0] for r in reply.plan["routes"]] == [
        "What is the name of Ann's puppy?",
        "who walked Biscuit while Ann was away?",
    ]
    order = [e.text for e in reply.evidence]
    assert order.index(texts[2]) < order.index(texts[1])


async def test_what_was_said_on_the_day_a_question_names_comes_first(tmp_path: Path) -> None:
    """ "What did Ann cook on 3 May 2024?" asks about what was said that day as well as about
    what is dated that day in its own words: the record said then leads the closer wording."""
    s = EvidenceStore(str(tmp_path / "db"), HashEmbedder.model_name, HASH_DIM)
    march, may = batch("a", 0, ["Ann cooked curry"]), batch("a", 1, ["Ann made a stew for Bo"])
    said = datetime(2024, 5, 3, 18, 0)
    may = may.model_copy(
        update={"records": [r.model_copy(update={"created_at": said}) for r in may.records]}
    )
    index_batches(s, [march, may], HashEmbedder())

    dated = await service(s).search(request("a", "What did Ann cook on 3 May 2024?", k=2))
    plain = await service(s).search(request("a", "What did Ann cook?", k=2))

    assert [e.text for e in dated.evidence] == ["Ann made a stew for Bo", "Ann cooked curry"]
    assert plain.evidence[0].text == "Ann cooked curry"


async def test_a_question_about_a_person_puts_their_own_words_first(tmp_path: Path) -> None:
    """Two records alike but for a word the questions do not use, one of Lea's turn and one
    of Omar's, among others: the one said by the person the question names comes first,
    whichever it is."""
    s = EvidenceStore(str(tmp_path / "db"), HashEmbedder.model_name, HASH_DIM)
    emb = HashEmbedder()
    said = ["The pottery class on Sunday was fun", "The pottery class on Sunday was lovely"]
    batches = [batch("a", i, [text], entities=()) for i, text in enumerate(said)]
    other = ["Bo fixed the old bike", "Ann baked bread", "The train was late again"]
    index_batches(s, [*batches, batch("a", 2, other)], emb)
    by = {b.records[0].evidence[0]: who for b, who in zip(batches, ["Lea", "Omar"], strict=True)}
    s.turns.upsert(
        [
            raw("a", "s1", t, "it was great", emb).model_copy(update={"speaker": w})
            for t, w in by.items()
        ]
    )

    for who in ("Lea", "Omar"):
        reply = await service(s).search(
            request("a", f"What did {who} say about the pottery class?")
        )
        records = [e for e in reply.evidence if e.kind == "record" and e.turn_ids[0] in by]
        assert [by[e.turn_ids[0]] for e in records] == [who, "Omar" if who == "Lea" else "Lea"]


async def test_what_answers_a_bridged_questions_first_part_still_covers_its_later_part(
    tmp_path: Path,
) -> None:
    """The later part ("where does it start") is searched with the name the first part's
    answer gives and past that answer, which keeps its place in both routes: the item that
    answers both parts comes first, not one that only shares the later part's words."""
    s = EvidenceStore(str(tmp_path / "db"), HashEmbedder.model_name, HASH_DIM)
    index_batches(
        s,
        [
            batch("a", 0, ["Ann signed up for the Lakeside Ten Miler on May 19"]),
            batch("a", 1, ["The Lakeside Ten Miler start is on Pier Street"]),
            batch("a", 2, ["Ann starts the new job where the bus line starts"]),
            batch("a", 3, ["Ann bought trail shoes for the race"]),
        ],
        HashEmbedder(),
    )
    reply = await service(s).search(
        request("a", "When is the ten miler and where does it start?", k=4)
    )

    assert reply.plan and "Lakeside Ten Miler" in reply.plan["routes"][1]["queries"][0]
    first = reply.evidence[0]
    assert "Lakeside" in first.text and first.routes == ["r0", "r1"], [
        (e.text, e.routes) for e in reply.evidence
    ]


async def test_the_plan_reads_a_questions_people_from_the_namespaces_speakers(
    tmp_path: Path,
) -> None:
    """Capitalized words that name no speaker (a library, a database) are not people: a
    question naming two of them is not split into a route per 'person', each kept to turns
    that person said."""
    s = EvidenceStore(str(tmp_path / "db"), HashEmbedder.model_name, HASH_DIM)
    emb = HashEmbedder()
    index_batches(s, [batch("a", 0, ["The app keeps its sessions in the database"])], emb)
    s.turns.upsert(
        [
            raw("a", "s1", t, text, emb).model_copy(update={"speaker": who})
            for t, text, who in [
                ("u1", "How do I store sessions?", "User"),
                ("a1", "Use a table.", "Assistant"),
            ]
        ]
    )
    reply = await service(s).search(request("a", "Where does Tornado keep sessions with Redis?"))
    assert reply.plan is not None and [r.get("speaker") for r in reply.plan["routes"]] == [None]
    said = await service(s).search(request("a", "What did the Assistant suggest for sessions?"))
    assert said.plan is not None and [r["speaker"] for r in said.plan["routes"]] == ["Assistant"]
