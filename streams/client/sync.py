"""The client for synchronous code: `MemoryClient` on an event loop of its own."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterable
from datetime import date
from typing import TYPE_CHECKING, Any, TypeVar

from schemas import Exchange, QueryReply
from streams.client.memory import MemoryClient
from streams.client.receipts import Receipt
from streams.settings import Settings

if TYPE_CHECKING:
    from workers.store.listing import Page

T = TypeVar("T")


class SyncMemoryClient:
    """The same client for synchronous code: its own event loop on a daemon thread."""

    def __init__(self, settings: Settings | None = None) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._client = MemoryClient(settings)
        try:
            self._run(self._client.start())
        except BaseException:
            self._loop.call_soon_threadsafe(self._loop.stop)  # no loop left behind
            self._thread.join()
            self._loop.close()
            raise

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def add(self, exchanges: Iterable[Exchange]) -> int:
        return self._run(self._client.add(list(exchanges)))

    def flush(self, namespace: str, session_id: str, after_seq: int | None = None) -> None:
        self._run(self._client.flush(namespace, session_id, after_seq))

    def end_session(self, namespace: str, session_id: str, after_seq: int | None = None) -> None:
        self._run(self._client.end_session(namespace, session_id, after_seq))

    def search(
        self,
        namespace: str,
        query: str,
        k: int = 10,
        session_id: str | None = None,
        timeout_s: float | None = None,
        ablation: str | None = None,
        answer: bool = False,
        token_budget: int | None = None,
    ) -> QueryReply:
        return self._run(
            self._client.search(
                namespace, query, k, session_id, timeout_s, ablation, answer, token_budget
            )
        )

    def wait_indexed(
        self, namespace: str, session_id: str, seq: int, timeout_s: float = 60.0
    ) -> None:
        self._run(self._client.wait_indexed(namespace, session_id, seq, timeout_s))

    def usage(self, namespace: str) -> dict[str, int]:
        return self._run(self._client.usage(namespace))

    def forget(
        self, namespace: str, session_id: str | None = None, timeout_s: float | None = None
    ) -> Receipt:
        return self._run(self._client.forget(namespace, session_id, timeout_s))

    def list_records(
        self,
        namespace: str,
        session_id: str | None = None,
        memory_type: str | None = None,
        since: date | None = None,
        page: int = 1,
        page_size: int = 50,
    ) -> Page:
        return self._run(
            self._client.list_records(namespace, session_id, memory_type, since, page, page_size)
        )

    def list_turns(
        self, namespace: str, session_id: str | None = None, page: int = 1, page_size: int = 50
    ) -> Page:
        return self._run(self._client.list_turns(namespace, session_id, page, page_size))

    def close(self) -> None:
        self._run(self._client.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    def __enter__(self) -> SyncMemoryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
