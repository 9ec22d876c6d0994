"""Topic names are part of the contract (DESIGN §4)."""

EXCHANGES = "memory.exchanges"
TURNS = "memory.turns"
SEGMENTS = "memory.segments"
RECORDS = "memory.records"
QUERIES = "memory.queries"
REPLIES = "memory.replies"
CONTROL = "memory.control"

ALL = (EXCHANGES, TURNS, SEGMENTS, RECORDS, QUERIES, REPLIES, CONTROL)


def dlq(topic: str) -> str:
    """Dead letters of `topic`: original key and bytes, the reason in headers."""
    return f"{topic}.dlq"
