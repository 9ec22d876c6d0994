"""`make demo`: the embedded stack, a sample conversation in, four questions out, stop.

Everything runs on loopback in a temporary directory that is removed at the end.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

from streams.logs import configure
from streams.settings import Settings
from streams.stack.embedded import DURABLE, Stack
from streams.stack.errors import StackError

CONVERSATION = Path(__file__).resolve().parents[2] / "deploy" / "demo" / "conversation.jsonl"
NAMESPACE = "demo"
# the questions asked of it, one per line, kept with the conversation they are about
QUESTIONS = tuple(
    line.strip()
    for line in (CONVERSATION.parent / "questions.txt").read_text(encoding="utf-8").splitlines()
    if line.strip()
)


async def run(stack: Stack, settings: Settings) -> None:
    from streams.cli.data import format_evidence
    from streams.client import MemoryClient
    from streams.ingest import produce
    from streams.kafka.lag import LagReader
    from streams.stack.ready import wait_ready
    from workers.datasets import load_jsonl

    started = time.perf_counter()
    await wait_ready(stack, settings, timeout_s=600)  # `lychee up`'s: a busy host loads slowly
    print(f"workers ready in {time.perf_counter() - started:.1f}s\n")

    conversations = load_jsonl(CONVERSATION)
    async with MemoryClient(settings) as client:
        t0 = time.perf_counter()
        stats = await produce(client, conversations, progress=False)
        async with LagReader(settings.kafka.bootstrap) as lag:
            await lag.wait_drained(timeout_s=120)
        ingest_s = time.perf_counter() - t0
        print(
            f"ingested {stats.exchanges} exchanges ({stats.sessions} sessions) from {CONVERSATION.name}: "
            f"produced in {stats.seconds * 1e3:.0f} ms, searchable after {ingest_s:.2f}s\n"
        )
        await show_records(settings, client)
        for question in QUESTIONS:
            t0 = time.perf_counter()
            reply = await client.search(NAMESPACE, question, k=3)
            took = (time.perf_counter() - t0) * 1e3
            print(format_evidence(reply))
            print(f"   answered in {took:.0f} ms (request to reply)\n")


async def show_records(settings: Settings, client: object) -> None:
    """What the encoder made of the conversation, and what it would have cost an LLM."""
    from streams.factories import open_store

    records = open_store(settings)
    counts = await asyncio.to_thread(records.count_by_type, NAMESPACE)
    print("memory records by type:", counts["records"])
    print("evidence nodes by type:", counts["nodes"])
    tbl = records.table("records")
    rows = tbl.search().where(f"namespace = '{NAMESPACE}'").limit(5).to_list() if tbl else []
    for row in rows:
        print(f"  - {row['normalized_text']}  ({', '.join(row['evidence'])})")
    usage = await client.usage(NAMESPACE)  # type: ignore[attr-defined]
    print(
        f"construction: {usage.get('segments', 0)} segments encoded offline; the LLM prompt "
        f"would have read {usage.get('prompt_tokens', 0)} tokens\n"
    )


def main() -> int:
    from streams.stack.ready import launch

    configure("WARNING", "console")
    data_dir = Path(tempfile.mkdtemp(prefix="lychee-demo-"))
    stack = Stack(data_dir, preset=DURABLE)  # what `lychee up` runs: the broker on S3 storage
    print(f"starting SeaweedFS, broker, Redis and workers in {data_dir} ...")
    try:
        settings = launch(stack)
        asyncio.run(run(stack, settings))
        return 0
    except KeyboardInterrupt:
        print("\ninterrupted")
        return 130
    except (StackError, TimeoutError) as exc:
        print(f"demo failed: {exc}", file=sys.stderr)
        return 1
    finally:
        print("stopping...")
        stack.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
        print("stopped")


if __name__ == "__main__":
    sys.exit(main())
