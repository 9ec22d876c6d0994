"""`lychee bench gateway`: latency of the HTTP gateway against an embedded stack.

It starts the embedded stack with its gateway (as `lychee up` does) in a temporary directory
and measures, over real HTTP:
- add: time from sending one exchange (no seq: the gateway numbers it) to the 202 receipt,
  with `concurrency` callers at once spread over `sessions` sessions;
- add then search with the receipt as `wait_for`: time to the first reply that can see it
  (read-your-writes);
- search: round trip of one search at a time on the indexed data.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import click
import httpx

from streams.bench.throughput import WORDS, synthetic_sentence
from streams.stack.embedded import Stack
from streams.stack.ready import launch, wait_ready
from workers.evaluation.metrics import percentiles

NAMESPACE = "bench-gw"
ADDS = f"/v1/namespaces/{NAMESPACE}/exchanges"
SEARCH = f"/v1/namespaces/{NAMESPACE}/search"


def gateway_bench(
    n: int,
    sessions: int,
    concurrency: int,
    searches: int,
    probes: int = 50,
    extra_env: dict[str, str] | None = None,
    show: bool = True,
) -> dict[str, Any]:
    """One run on a new stack (`extra_env`: more environment for its processes)."""
    stack = Stack(Path(tempfile.mkdtemp(prefix="lychee-bench-gw-")), gateway_port=0)
    try:
        settings = launch(stack, extra_env)
        asyncio.run(wait_ready(stack, settings))
        result = asyncio.run(
            _bench(stack.gateway_url, n, max(1, sessions), max(1, concurrency), searches, probes)
        )
    finally:
        stack.stop()
        shutil.rmtree(stack.data_dir, ignore_errors=True)
    if show:
        _print(result)
    return result


async def _ready(client: httpx.AsyncClient, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while (await client.get("/readyz")).status_code != 200:
        if time.monotonic() > deadline:
            raise TimeoutError("the gateway is not ready")
        await asyncio.sleep(0.5)


def _exchange(sid: str, eid: str, rng: random.Random) -> dict[str, Any]:
    turn = {"role": "user", "speaker": "Ana", "content": synthetic_sentence(rng)}
    return {"exchanges": [{"session_id": sid, "exchange_id": eid, "turns": [turn]}]}


async def _bench(
    url: str, n: int, sessions: int, concurrency: int, searches: int, probes: int
) -> dict[str, Any]:
    limits = httpx.Limits(
        max_connections=concurrency + 8, max_keepalive_connections=concurrency + 8
    )
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        await _ready(client)
        rng = random.Random(5)
        await _warm_up(client, rng)
        add_s, failures, adds_wall_s = await _adds(client, n, sessions, concurrency, rng)
        drain_s = await _drain(client)
        rw_s = await _read_your_writes(client, probes, rng)
        search_s = await _searches(client, searches, rng)

    def ms(values: list[float]) -> dict[str, float]:
        return {k: v * 1e3 for k, v in percentiles(values).items()}

    return {
        "adds": n,
        "sessions": sessions,
        "concurrency": concurrency,
        "adds_accepted": len(add_s),
        "add_failures": failures,
        "adds_per_s": len(add_s) / adds_wall_s if adds_wall_s else 0.0,
        # end to end: from the first add to everything accepted searchable
        "searchable_per_s": len(add_s) / (adds_wall_s + drain_s) if add_s else 0.0,
        "add_ms": ms(add_s),
        "drain_s": drain_s,
        "read_your_writes_ms": ms(rw_s),
        "probes": probes,
        "searches": len(search_s),
        "search_ms": ms(search_s),
    }


async def _warm_up(client: httpx.AsyncClient, rng: random.Random) -> None:
    """The first add and search create tables and load what is loaded lazily."""
    warm = await client.post(ADDS, json=_exchange("warm", "warm", rng))
    await client.post(
        SEARCH, json={"query": "warming up", "wait_for": warm.json(), "timeout_s": 120}
    )


async def _adds(
    client: httpx.AsyncClient, n: int, sessions: int, concurrency: int, rng: random.Random
) -> tuple[list[float], dict[int, int], float]:
    """`concurrency` callers, one exchange per request: each accepted add's seconds to its
    202, the count of each other status, and the seconds until every add was answered."""
    bodies = [_exchange(f"s{i % sessions}", f"e{i}", rng) for i in range(n)]
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    for b in bodies:
        queue.put_nowait(b)
    add_s: list[float] = []
    failures: dict[int, int] = {}

    async def caller() -> None:
        while not queue.empty():
            body = queue.get_nowait()
            t0 = time.perf_counter()
            r = await client.post(ADDS, json=body)
            if r.status_code == 202:
                add_s.append(time.perf_counter() - t0)
            else:
                failures[r.status_code] = failures.get(r.status_code, 0) + 1

    t0 = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(concurrency)))
    return add_s, failures, time.perf_counter() - t0


async def _drain(client: httpx.AsyncClient) -> float:
    """Seconds until everything accepted is searchable."""
    t1 = time.perf_counter()
    while not (await client.get(f"/v1/namespaces/{NAMESPACE}/status")).json()["searchable"]:
        await asyncio.sleep(0.2)
    return time.perf_counter() - t1


async def _read_your_writes(
    client: httpx.AsyncClient, probes: int, rng: random.Random
) -> list[float]:
    """Read your writes: one add, then a search that waits for its receipt, one at a time."""
    rw_s: list[float] = []
    for i in range(probes):
        t0 = time.perf_counter()
        r = await client.post(ADDS, json=_exchange("probe", f"p{i}", rng))
        reply = await client.post(
            SEARCH,
            json={
                "query": "probe",
                "k": 1,
                "wait_for": r.json(),
                "timeout_s": 60,
            },
        )
        if reply.status_code == 200:
            rw_s.append(time.perf_counter() - t0)
    return rw_s


async def _searches(client: httpx.AsyncClient, searches: int, rng: random.Random) -> list[float]:
    """Search round trips, one at a time."""
    search_s: list[float] = []
    for _ in range(searches):
        q = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 6)))
        t0 = time.perf_counter()
        r = await client.post(SEARCH, json={"query": q, "k": 10})
        if r.status_code == 200:
            search_s.append(time.perf_counter() - t0)
    return search_s


def _print(r: dict[str, Any]) -> None:
    fail = f", failed: {r['add_failures']}" if r["add_failures"] else ""
    click.echo(
        f"adds:             {r['adds_accepted']}/{r['adds']} accepted, {r['sessions']} sessions, "
        f"{r['concurrency']} callers at once{fail}"
    )
    click.echo(
        f"add (to the 202): p50 {r['add_ms']['p50']:.1f} ms, p95 {r['add_ms']['p95']:.1f} ms; "
        f"{r['adds_per_s']:.0f} adds/s"
    )
    click.echo(f"all searchable:   {r['drain_s']:.1f} s after the last 202")
    click.echo(
        f"add + search(wait_for): p50 {r['read_your_writes_ms']['p50']:.1f} ms, "
        f"p95 {r['read_your_writes_ms']['p95']:.1f} ms ({r['probes']} probes, one at a time)"
    )
    click.echo(
        f"search round trip: p50 {r['search_ms']['p50']:.1f} ms, p95 {r['search_ms']['p95']:.1f} ms "
        f"({r['searches']} searches, one at a time)"
    )
