"""Fixtures of the streams tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from streams.kafka import fetch


@pytest.fixture
def unguarded() -> Iterator[None]:
    """aiokafka's own batch unpacking, whatever a client or an app built earlier in this
    process installed (`streams.kafka.fetch`); left uninstalled afterwards too."""
    fetch.uninstall()
    yield
    fetch.uninstall()
