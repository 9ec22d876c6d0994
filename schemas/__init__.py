"""The contracts between stages. Pure data: no I/O, no other project imports."""

from schemas.base import SCHEMA_VERSION, Contract
from schemas.control import ForgetReceipt, ForgetRequest
from schemas.errors import ContractError, LycheeError
from schemas.exchange import (
    ControlKind,
    Exchange,
    ExchangeTopicMessage,
    Role,
    SessionControl,
    Turn,
    parse_exchange_message,
    session_key,
)
from schemas.query import EvidenceItem, QueryReply, QueryRequest
from schemas.segment import (
    BoundarySignals,
    FinalizeReason,
    LogPosition,
    Segment,
    SegmentExchange,
    SegmentMode,
    segment_id,
)
from schemas.turns import RawTurn

__all__ = [
    "SCHEMA_VERSION",
    "BoundarySignals",
    "Contract",
    "ContractError",
    "ControlKind",
    "EvidenceItem",
    "Exchange",
    "ExchangeTopicMessage",
    "FinalizeReason",
    "ForgetReceipt",
    "ForgetRequest",
    "LogPosition",
    "LycheeError",
    "QueryReply",
    "QueryRequest",
    "RawTurn",
    "Role",
    "Segment",
    "SegmentExchange",
    "SegmentMode",
    "SessionControl",
    "Turn",
    "parse_exchange_message",
    "segment_id",
    "session_key",
]
