"""Bytes at the door: each failure has its reason code, checked before any parsing it can skip."""

from __future__ import annotations

import orjson
import pytest

from schemas import QueryRequest
from streams.kafka.errors import SerdeError
from streams.kafka.serde import decode, decode_json


def code_of(value: bytes | None, max_bytes: int | None = None) -> str:
    with pytest.raises(SerdeError) as err:
        decode(value, QueryRequest, max_bytes)
    return err.value.error_type


def test_decode_null_and_empty_values_have_their_own_codes() -> None:
    assert code_of(None) == "null_value"
    assert code_of(b"") == "empty"


def test_decode_too_large_is_refused_before_parsing() -> None:
    garbage = b"{" + b"x" * 5000  # not JSON either: the size is what is reported
    with pytest.raises(SerdeError) as err:
        decode_json(garbage, max_bytes=1024)
    assert err.value.error_type == "too_large" and "5001 bytes" in err.value.reason


@pytest.mark.parametrize(
    "raw",
    [
        b'{"query": "a\xff b"}',
        b'{"query": "\\ud800"}',
        b'{"query": "\\udc00 x"}',
        b'"\xed\xa0\x80"',
    ],
)
def test_decode_invalid_utf8_and_lone_surrogates_are_encoding_errors(raw: bytes) -> None:
    assert code_of(raw) == "encoding"


def test_an_encoding_error_says_where_the_bytes_stop_being_utf8() -> None:
    with pytest.raises(SerdeError, match="not valid UTF-8 text: invalid start byte at byte 1"):
        decode_json(b"\x00\xff\xfegarbage")
    with pytest.raises(SerdeError, match="not valid text: .*surrogate"):
        decode_json(b'{"query": "\\ud800"}')


def test_decode_nesting_past_orjson_limit_is_too_deep() -> None:
    assert code_of(b"[" * 2000 + b"]" * 2000) == "too_deep"


@pytest.mark.parametrize("raw", [b"[1, 2]", b'"text"', b"3", b"null"])
def test_decode_json_that_is_not_an_object_is_a_schema_error(raw: bytes) -> None:
    assert code_of(raw) == "schema"


def test_decode_unknown_schema_version_has_its_own_code() -> None:
    value = {
        "schema_version": 5,
        "correlation_id": "c",
        "namespace": "n",
        "query": "q",
        "reply_partition": 0,
        "deadline_ms": 1,
    }
    assert code_of(orjson.dumps(value)) == "schema_version"
