"""Query processes: a query worker's requests answered by child processes, one per core.

A question's work is mostly Python under the GIL, so one process answers about as many
questions a second with eight in flight as with one (docs/notes/issue47.md, tenth round). The
worker keeps the consumer, the replies and the offsets; each child holds its own model and
snapshots and answers the requests it is given, several at once, sending back with each reply
what its metrics were told and carrying on the request's trace. A child reads its requests
from a pipe and leaves when the worker's end closes, so a worker killed with -9 leaves none
behind; a child that dies fails only the requests it held and is started again.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import itertools
import multiprocessing
import os
import signal
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

import structlog
from opentelemetry import context as otel_context

from schemas import QueryReply, QueryRequest
from streams import logs, metrics, tracing
from streams.apps.collection import collect_as_a_worker
from streams.kafka.serde import encode
from streams.settings import Settings
from workers import telemetry

log = structlog.get_logger("lychee.query")

MAX_AUTO = 8  # processes when the setting leaves it to the cores
START_TIMEOUT_S = 600.0  # a cold model export on a busy machine takes minutes
GRACE_S = 2.0  # past a request's deadline, how long the worker waits for its process's word
EXIT_WAIT_S = 5.0  # how long a closing worker waits for its processes to flush and leave
RESTART_PAUSE_S = 5.0  # between attempts to start a process that failed to start


def cores() -> int:
    """The cores this process may run on (all of them where the OS cannot say)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def process_count(settings: Settings) -> int:
    """How many query processes a worker runs: the setting, else one per core it may use."""
    return settings.query.processes or max(1, min(MAX_AUTO, cores()))


class QueryFailed(Exception):
    """A request's search failed in a query process; the text names what raised there."""


# -- in a query process ------------------------------------------------------------------------


def _child_main(inbox: Connection, outbox: Connection, settings: Settings, threads: int) -> None:
    """A query process: its worker decides when it ends (the pipe's end), not a signal to the
    process group, so that it flushes its spans first."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    collect_as_a_worker()
    logs.configure(settings.observability.log_level, settings.observability.log_format)
    metrics.set_stage("query")
    taken = metrics.keep_for_replay()
    tracing.setup("query")
    asyncio.run(_serve(inbox, outbox, settings, threads, taken))


async def _serve(
    inbox: Connection,
    outbox: Connection,
    settings: Settings,
    threads: int,
    taken: Callable[[], list[Any]],
) -> None:
    # imported here, not by the worker: it loads no store or model of its own
    from streams.apps.query_service import build_service

    service = await build_service(settings, threads)
    loop = asyncio.get_running_loop()
    asked: asyncio.Queue[tuple[int, QueryRequest, tuple[tuple[str, bytes], ...]]]
    asked = asyncio.Queue()

    def read() -> None:
        while True:
            try:
                message = inbox.recv()
            except (EOFError, OSError):
                tracing.shutdown()  # the spans still buffered, then out: nobody is left to answer
                os._exit(0)
            loop.call_soon_threadsafe(asked.put_nowait, message)

    outbox.send(service.recall.embedder.model_name)  # its first word: ready
    threading.Thread(target=read, name="query-inbox", daemon=True).start()
    running: set[asyncio.Task[None]] = set()
    while True:
        rid, req, headers = await asked.get()
        task = asyncio.create_task(_answer(outbox, service.search, rid, req, headers, taken))
        running.add(task)
        task.add_done_callback(running.discard)


async def _answer(
    outbox: Connection,
    search: Callable[[QueryRequest], Any],
    rid: int,
    req: QueryRequest,
    headers: tuple[tuple[str, bytes], ...],
    taken: Callable[[], list[Any]],
) -> None:
    parent = telemetry.parent(headers)  # the worker's `process memory.queries` span
    token = None if parent is None else otel_context.attach(parent)
    try:
        remaining_s = max(req.deadline_ms / 1000 - time.time(), 0.001)
        reply = await asyncio.wait_for(search(req), remaining_s)
        outcome: tuple[str, Any] = ("reply", EncodedReply.of(reply))
    except TimeoutError:
        outcome = ("deadline", None)
    except Exception as exc:  # noqa: BLE001 - the worker answers with the error
        outcome = ("failed", f"{type(exc).__name__}: {exc}")
    finally:
        if token is not None:
            otel_context.detach(token)
    outbox.send((rid, *outcome, taken()))


@dataclass(frozen=True)
class EncodedReply:
    """A reply as the replies topic carries it, with what the worker reads of it. A query
    process encodes its reply once and the worker sends the bytes on: a reply of a hundred
    items pickled through the pipe, rebuilt and encoded again in the worker cost about 4 ms
    a request of the cores the query processes share (docs/notes/issue47.md)."""

    correlation_id: str
    status: str
    timings_ms: dict[str, float]
    data: bytes

    @classmethod
    def of(cls, reply: QueryReply) -> EncodedReply:
        return cls(reply.correlation_id, reply.status, dict(reply.timings_ms), encode(reply))


# -- in the worker -----------------------------------------------------------------------------


@dataclass(eq=False)
class _Child:
    slot: int
    process: BaseProcess
    requests: Connection  # written here alone: closing it is the process's end
    replies: Connection  # read by the worker's reader thread alone
    waiting: dict[int, asyncio.Future[tuple[str, Any]]] = field(default_factory=dict)


class QueryProcesses:
    """`count` query processes behind one `search`: a request goes to the process holding
    the fewest, among equals to its namespace's own (whose snapshots are then warm)."""

    def __init__(self, settings: Settings, count: int) -> None:
        self.settings = settings
        self.count = count
        self.threads = max(1, cores() // count)  # the model's threads in each
        self.model_name = ""
        self._children: list[_Child | None] = [None] * count
        self._ids = itertools.count()
        self._some_alive = asyncio.Event()
        self._closing = False
        self._restarts: set[asyncio.Task[None]] = set()
        atexit.register(self.close)  # before multiprocessing's own, which would kill them

    async def start(self) -> None:
        await asyncio.gather(*(self._start(slot) for slot in range(self.count)))

    async def _start(self, slot: int) -> None:
        spawn = multiprocessing.get_context("spawn")  # fork would copy the loop and threads
        # one pipe each way: the worker's end of the requests is closed by nothing but its
        # close (or its death), which the child reads as its end
        inbox, requests = spawn.Pipe(duplex=False)
        replies, outbox = spawn.Pipe(duplex=False)
        process = spawn.Process(
            target=_child_main,
            args=(inbox, outbox, self.settings, self.threads),
            name=f"lychee-query-{slot}",
            daemon=True,
        )
        process.start()
        inbox.close()
        outbox.close()
        self.model_name = await asyncio.to_thread(_ready, replies, process)
        child = _Child(slot, process, requests, replies)
        self._children[slot] = child
        self._some_alive.set()
        loop = asyncio.get_running_loop()
        threading.Thread(target=self._read, args=(child, loop), daemon=True).start()
        log.info("query.process_ready", slot=slot, pid=process.pid)

    def _read(self, child: _Child, loop: asyncio.AbstractEventLoop) -> None:
        while True:
            try:
                message = child.replies.recv()
            except (EOFError, OSError):
                break
            with contextlib.suppress(RuntimeError):  # the loop closed under a closing worker
                loop.call_soon_threadsafe(self._settle, child, message)
        child.replies.close()
        child.process.join(EXIT_WAIT_S)
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._lost, child)

    def _settle(self, child: _Child, message: tuple[int, str, Any, list[Any]]) -> None:
        rid, kind, value, observations = message
        metrics.replay(observations)
        future = child.waiting.pop(rid, None)
        if future is not None and not future.done():
            future.set_result((kind, value))

    def _lost(self, child: _Child) -> None:
        if self._closing or self._children[child.slot] is not child:
            return
        code = child.process.exitcode
        child.requests.close()
        self._children[child.slot] = None
        if not any(self._children):
            self._some_alive.clear()
        died = QueryFailed(
            f"the query process answering it (pid {child.process.pid}) exited with code {code}; "
            "nothing is lost: ask again"
        )
        for future in child.waiting.values():
            if not future.done():
                future.set_exception(died)
        child.waiting.clear()
        log.error("query.process_died", slot=child.slot, pid=child.process.pid, exit_code=code)
        self._restarts.add(task := asyncio.ensure_future(self._restart(child.slot)))
        task.add_done_callback(self._restarts.discard)

    async def _restart(self, slot: int) -> None:
        """A process in the slot again; one that cannot start is tried again, never given up
        on while the worker runs (the others answer meanwhile)."""
        while not self._closing:
            try:
                await self._start(slot)
                return
            except Exception as exc:  # noqa: BLE001 - logged, tried again
                log.error("query.process_start_failed", slot=slot, error=repr(exc))
                await asyncio.sleep(RESTART_PAUSE_S)

    def _pick(self, namespace: str) -> _Child:
        """Called while `_some_alive` is set: some process is alive."""
        own = zlib.crc32(namespace.encode()) % self.count
        alive = [c for c in self._children if c is not None]
        return min(alive, key=lambda c: (len(c.waiting), c.slot != own))

    async def search(self, req: QueryRequest, timeout_s: float) -> EncodedReply:
        """The reply of a query process; TimeoutError past the deadline, `QueryFailed` when
        its search raised or its process died."""
        deadline = time.monotonic() + timeout_s
        if not self._some_alive.is_set():  # all restarting: wait for the first back
            await asyncio.wait_for(self._some_alive.wait(), timeout_s)
        child = self._pick(req.namespace)
        rid = next(self._ids)
        future = child.waiting[rid] = asyncio.get_running_loop().create_future()
        try:
            child.requests.send((rid, req, telemetry.inject()))
            kind, value = await asyncio.wait_for(future, deadline - time.monotonic() + GRACE_S)
        except OSError as exc:
            raise QueryFailed(f"the query process could not be given it: {exc}") from exc
        finally:
            child.waiting.pop(rid, None)
        if kind == "deadline":
            raise TimeoutError
        if kind == "failed":
            raise QueryFailed(value)
        reply: EncodedReply = value
        return reply

    def close(self) -> None:
        """Close the pipes and let the processes flush their spans and leave."""
        self._closing = True
        children = [c for c in self._children if c is not None]
        for child in children:
            child.requests.close()
        for child in children:
            child.process.join(EXIT_WAIT_S)
            if child.process.is_alive():
                child.process.kill()


def _ready(conn: Connection, process: BaseProcess) -> str:
    """The process's first word, its model's name, once its model and service are loaded."""
    give_up = time.monotonic() + START_TIMEOUT_S
    while not conn.poll(0.5):
        if not process.is_alive():
            raise RuntimeError(
                f"query process {process.pid} exited with code {process.exitcode} while "
                "starting: its log above says why"
            )
        if time.monotonic() > give_up:
            process.kill()
            raise RuntimeError(f"query process {process.pid} not ready in {START_TIMEOUT_S:.0f}s")
    model_name: str = conn.recv()
    return model_name
