"""A durable embedded stack (SeaweedFS, Tansu on S3, Redis fsyncing every write), started once
for the tests of this folder that need S3; nothing else in the suite pays for SeaweedFS."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from streams.stack import seaweed
from streams.stack.embedded import DURABLE, Stack

# keys a user might have in their shell: they must never become keys of the local store
FOREIGN_KEYS = {
    "AWS_ACCESS_KEY_ID": "AKIAFOREIGNKEY000001",
    "AWS_SECRET_ACCESS_KEY": "foreign-secret",
}


@dataclass(frozen=True)
class S3Store:
    stack: Stack
    endpoint: str
    creds: seaweed.S3Credentials

    def options(self) -> dict[str, str]:
        return seaweed.storage_options(self.endpoint, self.creds)

    def client(self) -> Any:
        return seaweed.s3_client(self.endpoint, self.creds)


@pytest.fixture(scope="package")
def s3_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Store]:
    stack = Stack(tmp_path_factory.mktemp("durable"), preset=DURABLE)
    saved = {k: os.environ.get(k) for k in FOREIGN_KEYS}
    os.environ.update(FOREIGN_KEYS)
    try:
        stack.start_infra()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    try:
        assert stack.s3_endpoint is not None
        yield S3Store(stack, stack.s3_endpoint, seaweed.credentials(stack.data_dir))
    finally:
        stack.stop()
