"""A Python client for the lychee-memory gateway over HTTP, without Kafka: add, search,
list, forget, dead letters; the LangGraph store (`lychee_client.langgraph`) and the OpenAI
Agents SDK session and tool (`lychee_client.agents`) are built on it.

Requests and answers are the `schemas` models the gateway itself validates with.
"""

from lychee_client.aio import AsyncLycheeClient
from lychee_client.calls import SearchResult
from lychee_client.client import LycheeClient
from lychee_client.errors import (
    ClientClosed,
    ClientError,
    GatewayTimedOut,
    GatewayUnreachable,
    ListingChanged,
    LycheeHTTPError,
    UnreadableReply,
)
from lychee_client.retry import NO_RETRY, RetryPolicy
from schemas import EvidenceItem, Turn
from schemas.gateway import ExchangeIn, Receipt

__all__ = [
    "NO_RETRY",
    "AsyncLycheeClient",
    "ClientClosed",
    "ClientError",
    "EvidenceItem",
    "ExchangeIn",
    "GatewayTimedOut",
    "GatewayUnreachable",
    "ListingChanged",
    "LycheeClient",
    "LycheeHTTPError",
    "Receipt",
    "RetryPolicy",
    "SearchResult",
    "Turn",
    "UnreadableReply",
]
