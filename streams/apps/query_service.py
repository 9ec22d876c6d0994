"""The query service a query worker (or each of its query processes) serves, built from
settings: the embedder, the store with its snapshots, the planner, the answerer, the
second stage and the written-version marks."""

from __future__ import annotations

import asyncio
from functools import partial

from redis.asyncio import Redis

from streams import metrics
from streams.factories import (
    adapter_of,
    llm_caller_options,
    make_embedder,
    make_llm_client,
    make_planner,
    open_store,
    recall_config,
    scorer_of,
)
from streams.settings import Settings
from streams.written import WrittenVersions
from workers.query.answer import LLMAnswerer
from workers.query.presets import preset_for
from workers.query.rerank import load_reranker
from workers.query.service import QueryDeps, QueryService
from workers.store import TABLES


def _redis(settings: Settings) -> Redis:
    """Read once a request, beside the searches: a slow Redis must not hold them long."""
    return Redis.from_url(settings.redis.url, socket_timeout=1, socket_connect_timeout=1)


async def build_service(settings: Settings, threads: int = 0) -> QueryService:
    """The service, its model loaded off the event loop (it must stay free for the Redis
    client it opens). `threads`: the local model's when `embedding.threads` is unset (0: one
    per core)."""
    s = settings
    embedder = await asyncio.to_thread(make_embedder, s, threads)
    llm = make_llm_client(s)
    deps = QueryDeps(
        store=open_store(s, embedder, snapshots=True),
        embedder=embedder,
        planner=make_planner(llm, s),
        answerer=LLMAnswerer(
            *llm, **llm_caller_options(s, LLMAnswerer.policy), observer=metrics.LLM_OBSERVER
        )
        if llm
        else None,
        reranker=await asyncio.to_thread(load_reranker, s.query.reranker_model),
        scorer=scorer_of(s),
        adapter=await asyncio.to_thread(adapter_of, s, embedder),
        written=partial(WrittenVersions(_redis(s)).of, tables=TABLES),
    )
    # off the loop: the service loads the token counter's tables as it starts
    return await asyncio.to_thread(
        QueryService,
        deps,
        recall_config(s),
        rerank_candidates=s.query.reranker_candidates,
        preset=preset_for(s.query.ablation),
    )
