"""Query processes (`query.processes`): the replies of the worker's own process, their
metrics in the worker's registry, a process killed with -9 failing only what it held and
coming back, and none outliving its worker."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from schemas import QueryReply
from streams.apps.query_processes import (
    EncodedReply,
    QueryFailed,
    QueryProcesses,
    cores,
    process_count,
)
from streams.apps.query_service import build_service
from streams.bench.harness import load_reported
from streams.factories import make_embedder, open_store
from streams.settings import Settings
from streams.stack.process import wait_until
from tests.evals.recall_probe import _request, ingest
from tests.streams.bench.files import write_locomo

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def filled(
    tmp_path_factory: pytest.TempPathFactory, redis_url: str
) -> tuple[Settings, list[tuple[str, str]]]:
    """A store holding the invented sample conversation, and its questions."""
    root = tmp_path_factory.mktemp("processes")
    write_locomo(root / "locomo.json")
    convs, _ = load_reported(root / "locomo.json")
    settings = Settings.load(
        None, redis={"url": redis_url}, store={"uri": str(root / "lance")}, query={"processes": 2}
    )
    embedder = make_embedder(settings, threads=1)
    asyncio.run(ingest(convs, embedder, open_store(settings, embedder), settings))
    return settings, [(c.namespace, qa.question) for c in convs for qa in c.qa]


def _same(reply: QueryReply) -> dict[str, Any]:
    return reply.model_dump(exclude={"correlation_id", "timings_ms", "served_at"})


def _read(sent: EncodedReply) -> QueryReply:
    """The reply as a client reads the bytes the worker sends, checked against what the
    worker reads of it."""
    reply = QueryReply.model_validate_json(sent.data)
    assert (reply.correlation_id, reply.status) == (sent.correlation_id, sent.status)
    assert reply.timings_ms == sent.timings_ms
    return reply


def _embedded(model: str) -> float:
    labels = {"stage": "query", "model": model}
    return REGISTRY.get_sample_value("lychee_embedding_seconds_count", labels) or 0.0


@pytest.fixture
async def processes(
    filled: tuple[Settings, list[tuple[str, str]]],
) -> AsyncIterator[QueryProcesses]:
    started = QueryProcesses(filled[0], 2)
    await started.start()
    yield started
    started.close()


async def test_a_query_process_answers_as_the_worker_own_process_would(
    filled: tuple[Settings, list[tuple[str, str]]], processes: QueryProcesses
) -> None:
    settings, questions = filled
    own = await build_service(settings, threads=processes.threads)  # the same model threads
    before = _embedded(processes.model_name)
    for namespace, question in questions:
        expected = await own.search(_request(namespace, question, 10))
        got = _read(await processes.search(_request(namespace, question, 10), 60))
        assert got.status == "ok" and got.evidence
        assert _same(got) == _same(expected)
    # what the processes' model metrics were told is in this process's registry
    assert _embedded(processes.model_name) > before


async def test_a_query_process_killed_fails_what_it_held_and_comes_back(
    filled: tuple[Settings, list[tuple[str, str]]], processes: QueryProcesses
) -> None:
    _, questions = filled
    victim = processes._children[0]
    assert victim is not None
    asked = [
        asyncio.ensure_future(processes.search(_request(ns, q, 10), 60)) for ns, q in questions
    ]
    await asyncio.wait_for(_given_out(processes, len(asked)), 60)
    os.kill(victim.process.pid or 0, signal.SIGKILL)
    answers = await asyncio.gather(*asked, return_exceptions=True)
    failed = [a for a in answers if not isinstance(a, EncodedReply)]
    assert failed and all(isinstance(a, QueryFailed) and "code -9" in str(a) for a in failed)
    assert len(failed) < len(answers)  # the other process answered its share
    await asyncio.wait_for(_both_alive(processes, victim.process.pid), 300)
    for namespace, question in questions:  # on both again
        reply = _read(await processes.search(_request(namespace, question, 10), 60))
        assert reply.status == "ok" and reply.evidence


async def _given_out(processes: QueryProcesses, count: int) -> None:
    """Until `count` requests are held by the processes."""
    while sum(len(c.waiting) for c in processes._children if c) < count:
        await asyncio.sleep(0)


async def _both_alive(processes: QueryProcesses, dead: int | None) -> None:
    while not all(c is not None and c.process.pid != dead for c in processes._children):
        await asyncio.sleep(0.2)


def test_query_processes_leave_when_their_worker_is_killed(
    filled: tuple[Settings, list[tuple[str, str]]], tmp_path: Path
) -> None:
    settings, _ = filled
    script = textwrap.dedent(
        """
        import asyncio, sys
        from streams.apps.query_processes import QueryProcesses
        from streams.settings import Settings

        async def main():
            processes = QueryProcesses(Settings.load(None, query={"processes": 2}), 2)
            await processes.start()
            print("pids", *(c.process.pid for c in processes._children), flush=True)
            await asyncio.sleep(600)

        asyncio.run(main())
        """
    )
    env = {
        **os.environ,
        "LYCHEE_REDIS_URL": settings.redis.url,
        "LYCHEE_LANCEDB_URI": settings.store.uri,
    }
    worker = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, env=env, text=True
    )
    try:
        assert worker.stdout is not None
        line = next(x for x in worker.stdout if x.startswith("pids "))  # after its logs
        pids = [int(p) for p in line.split()[1:]]
        assert len(pids) == 2 and all(_alive(p) for p in pids)
        worker.kill()
        worker.wait(30)
        wait_until(lambda: not any(map(_alive, pids)), 30, "query processes gone", None)
    finally:
        worker.kill()


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting for its dead parent's reaper does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def test_a_worker_runs_the_processes_it_is_told_else_one_per_core() -> None:
    assert process_count(Settings.load(None, query={"processes": 3})) == 3
    assert process_count(Settings.load(None, query={"processes": 1})) == 1
    assert process_count(Settings.load(None)) == min(8, cores())
