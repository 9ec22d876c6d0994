"""The Python client of the stack: Kafka in and out, Redis for a forget's fence and token
counts, the store read directly for listings (`memory`); a forget's receipts (`receipts`)."""

from streams.client.memory import MemoryClient, SyncMemoryClient, construction_usage
from streams.client.receipts import Receipt

__all__ = ["MemoryClient", "Receipt", "SyncMemoryClient", "construction_usage"]
