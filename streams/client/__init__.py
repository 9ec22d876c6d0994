"""The Python client of the stack: Kafka in and out, Redis for a forget's fence and token
counts, the store read directly for listings (`memory`); a forget's receipts (`receipts`);
the same client for synchronous code (`sync`)."""

from streams.client.memory import MemoryClient, construction_usage
from streams.client.receipts import Receipt
from streams.client.sync import SyncMemoryClient

__all__ = ["MemoryClient", "Receipt", "SyncMemoryClient", "construction_usage"]
