"""Starting the embedded stack quietly and waiting until its workers answer.

Shared by the demo and the benchmarks: `launch` starts every stage with warnings-only logs,
`wait_ready` probes the segmenter and the query service end to end.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from streams.client import MemoryClient
from streams.errors import ReplyTimeout
from streams.kafka.lag import LagReader
from streams.settings import Settings
from streams.stack.embedded import Stack
from streams.stack.errors import StackError
from streams.stack.process import log_tail

WORKER_ENV = {"LYCHEE_LOG_LEVEL": "WARNING"}
READY_NAMESPACE = "warmup"


def launch(stack: Stack, extra_env: dict[str, str] | None = None) -> Settings:
    """`Stack.launch` with quiet workers (warnings only), for benchmarks and the demo."""
    return stack.launch({**WORKER_ENV, **(extra_env or {})})


def check_alive(stack: Stack) -> None:
    for child in stack.children:
        if not child.alive:
            rc = child.proc.returncode if child.proc else "?"
            raise StackError(
                f"{child.name} exited with {rc}; last lines of {child.log_path}:\n{log_tail(child.log_path)}"
            )


async def wait_ready(stack: Stack, settings: Settings, timeout_s: float = 120.0) -> None:
    """`wait_workers` for a stack started in this process: a worker that died is an error."""

    def tails() -> str:
        return "\n".join(
            f"--- {c.name}\n{log_tail(c.log_path)}"
            for c in stack.children
            if c.name in ("segmenter", "query")
        )

    await wait_workers(settings, timeout_s, lambda: check_alive(stack), tails)


async def wait_workers(
    settings: Settings,
    timeout_s: float = 120.0,
    check: Callable[[], None] = lambda: None,
    tails: Callable[[], str] = lambda: "",
) -> None:
    """Wait until the segmenter consumes and the query service answers.

    Workers log `segmenter.ready` / `query.ready` at INFO, which a WARNING level hides,
    so readiness is probed instead: the segmenter commits a no-op control message only
    once its model is loaded, and the query service answers only once its model is.
    `check` raises when waiting is pointless (a worker died, a stop was asked for).
    """
    deadline = time.monotonic() + timeout_s

    def left(waiting: str) -> float:
        check()
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"workers not ready after {timeout_s:.0f}s: {waiting}\n{tails()}")
        return remaining

    async with MemoryClient(settings) as client:
        await client.end_session(READY_NAMESPACE, "ready")  # no state: a no-op that gets committed
        async with LagReader(settings.kafka.bootstrap) as lag:
            while (await lag.stage("segmenter")).lag:
                left("the segmenter has not read a probe on memory.exchanges (its model loads)")
                await asyncio.sleep(0.25)
        while True:
            try:
                # without the planner: an LLM busy encoding says nothing of the worker
                await client.search(
                    READY_NAMESPACE,
                    "ready?",
                    k=1,
                    timeout_s=min(
                        3.0, left("the query service answers no probe (its model loads)")
                    ),
                    ablation="no-planner",
                )
                return
            except ReplyTimeout:
                continue
