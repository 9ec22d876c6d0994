"""The SQL filters of every store read: the namespace prefilter first, quoting escaped."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from workers.store.snapshots import Match

ID_CHUNK = 500  # ids per `id IN (...)` filter: keeps the SQL text small


def namespace_filter(namespace: str, session_id: str | None = None) -> str:
    # Names are validated by the contracts (letters, digits, . _ : @ + -); quoting is
    # still escaped so that a filter can never be widened by its input.
    clause = f"namespace = {sql_quote(namespace)}"
    if session_id:
        clause += f" AND session_id = {sql_quote(session_id)}"
    return clause


def match_filter(namespace: str, match: Match) -> str:
    """`namespace_filter` and, per column of `match`, one of its values."""
    clause = namespace_filter(namespace)
    for column, values in match.items():
        clause += f" AND {column} IN ({', '.join(sql_quote(v) for v in sorted(values))})"
    return clause


def matches_nothing(match: Match) -> bool:
    return any(not values for values in match.values())  # `IN ()` is not valid SQL


def sql_quote(value: str) -> str:
    """A SQL string literal, quotes escaped."""
    return "'" + value.replace("'", "''") + "'"


def id_in(ids: Sequence[str]) -> str:
    return f"id IN ({', '.join(sql_quote(i) for i in ids)})"


def chunks(items: list[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
