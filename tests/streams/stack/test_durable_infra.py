"""The durable stack's infrastructure: loopback only, its own keys only, Redis fsyncing every
write, lag read right on an S3 broker, LanceDB on the same S3 store."""

from __future__ import annotations

import asyncio
import json
import textwrap
from pathlib import Path

import psutil
import pytest
import redis
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from botocore import UNSIGNED
from botocore.exceptions import ClientError

from streams.kafka.lag import LagReader
from streams.stack import seaweed
from tests.processes import run_together
from tests.streams.stack.conftest import FOREIGN_KEYS, S3Store
from tests.workers.builders import TOY_DIM, turn
from workers.store import EvidenceStore
from workers.store.arrow import ID

pytestmark = pytest.mark.integration


def test_durable_stack_listens_on_loopback_only(s3_store: S3Store) -> None:
    listening = []
    for child in s3_store.stack.children:
        proc = psutil.Process(child.pid)
        listening += [
            (child.name, c.laddr.ip)
            for c in proc.net_connections("tcp")
            if c.status == psutil.CONN_LISTEN
        ]
        assert proc.net_connections("udp") == []
    names = {name for name, _ in listening}
    assert names == {"seaweedfs", "broker", "redis"}
    assert {ip for _, ip in listening} == {"127.0.0.1"}


def test_durable_stack_seaweedfs_accepts_only_its_generated_keys(s3_store: S3Store) -> None:
    weed = next(c for c in s3_store.stack.children if c.name == "seaweedfs")
    environ = Path(f"/proc/{weed.pid}/environ").read_bytes().split(b"\0")
    assert not [v for v in environ if v.startswith((b"AWS_", b"S3_"))]
    assert s3_store.client().head_bucket(Bucket=seaweed.BUCKET)
    foreign = seaweed.S3Credentials(
        FOREIGN_KEYS["AWS_ACCESS_KEY_ID"], FOREIGN_KEYS["AWS_SECRET_ACCESS_KEY"]
    )
    anonymous = seaweed.s3_client(s3_store.endpoint, s3_store.creds)
    anonymous.meta.events.register_first("choose-signer", lambda **_: UNSIGNED)
    for client in (seaweed.s3_client(s3_store.endpoint, foreign), anonymous):
        with pytest.raises(ClientError):
            client.list_objects_v2(Bucket=seaweed.BUCKET)
    creds_file = s3_store.stack.data_dir / seaweed.CREDENTIALS_FILE
    assert creds_file.stat().st_mode & 0o077 == 0


def test_durable_stack_redis_fsyncs_the_aof_before_every_reply(s3_store: S3Store) -> None:
    client = redis.Redis.from_url(s3_store.stack.redis_url)
    try:
        assert client.config_get("appendonly") == {"appendonly": "yes"}
        assert client.config_get("appendfsync") == {"appendfsync": "always"}
    finally:
        client.close()


async def test_lag_end_offsets_on_an_s3_broker_are_the_high_watermark(s3_store: S3Store) -> None:
    # Tansu on S3 answers ListOffsets(latest) far below the end (4 for 111 records)
    bootstrap = s3_store.stack.bootstrap
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    await admin.create_topics([NewTopic("lag-probe", 3, 1)])
    await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    sent = [0, 0, 0]
    try:
        async with LagReader(bootstrap) as lag:
            for round_ in range(3):
                futures = [
                    await producer.send("lag-probe", b"v", partition=i % 3) for i in range(100)
                ]
                await asyncio.gather(*futures)
                for i in range(7):  # small batches after a big one
                    await producer.send_and_wait("lag-probe", b"w", partition=i % 3)
                for i in range(107):
                    sent[i % 3 if i < 100 else (i - 100) % 3] += 1
                ends = await lag.end_offsets("lag-probe")
                assert [ends[tp] for tp in sorted(ends)] == sent, f"round {round_}"
    finally:
        await producer.stop()


def test_evidence_store_on_s3_writes_reads_and_searches(s3_store: S3Store) -> None:
    uri = f"s3://{seaweed.BUCKET}/lancedb-store-test"
    store = EvidenceStore(uri, "toy", TOY_DIM, storage_options=s3_store.options())
    store.turns.upsert(
        [turn("a", "t1", "sourdough starter doubled", 0), turn("a", "t2", "half marathon", 1)]
    )
    # a redelivered turn merges on its id, a new one is added
    store.turns.upsert([turn("a", "t2", "half marathon", 1), turn("a", "t3", "training plan", 2)])
    fresh = EvidenceStore(uri, "toy", TOY_DIM, storage_options=s3_store.options())
    assert fresh.count("turns", "a") == 3
    assert [h["turn_id"] for h in fresh.turns.search_text("a", "training", 5)] == ["t3"]
    listed = s3_store.client().list_objects_v2(Bucket=seaweed.BUCKET, Prefix="lancedb-store-test/")
    assert listed["KeyCount"] > 0  # the rows live in the bucket, not on a local disk


WRITER = textwrap.dedent("""
    import json, sys
    import lancedb, pyarrow as pa
    uri, options, who = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
    tbl = lancedb.connect(uri, storage_options=options).open_table("t")
    for i in range(6):
        ids = [f"{who}-{i}-{j}" for j in range(4)] + ["shared"]
        rows = pa.table({"id": ids, "who": [who] * 5}).cast(tbl.schema)
        tbl.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(rows)
""")


def test_evidence_store_on_s3_two_writer_processes_lose_no_commit(s3_store: S3Store) -> None:
    """LanceDB commits on s3:// with a conditional put (If-None-Match), which SeaweedFS
    enforces: concurrent writers retry instead of overwriting each other's version. The id
    that both insert is stored once because `id` is the table's primary key (store's `ID`)."""
    import lancedb
    import pyarrow as pa

    uri = f"s3://{seaweed.BUCKET}/lancedb-writers-test"
    db = lancedb.connect(uri, storage_options=s3_store.options())
    db.create_table("t", schema=pa.schema([ID, ("who", pa.string())]))
    options = json.dumps(s3_store.options())
    assert run_together(WRITER, [uri, options, "x"], [uri, options, "y"]) == [0, 0]
    tbl = db.open_table("t")
    ids = tbl.to_arrow()["id"].to_pylist()
    assert len(ids) == len(set(ids)) == 2 * 6 * 4 + 1
    assert tbl.version == 1 + 2 * 6  # every commit is its own version: none overwrote another
