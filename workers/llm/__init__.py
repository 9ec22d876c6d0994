"""Chat completions against any OpenAI-compatible server, shared by the encoder, the planner
and the answerer.

One module per job: `policy` (which failures are retried, and how long to wait), `calls`
(the bounded retry loop `complete` and `ChatCaller`, the callers' common base), `stream`
(one streamed attempt, timed out on silence), `formats` (the structured-output ladder),
`replies` (reading a reply), `usage` (token accounting), `observer` (what metrics hear of
each attempt), `completion` (what an attempt produced) and `errors`. The names the rest of
the tree uses are re-exported here.
"""

from workers.llm.calls import ChatCaller, complete, make_client
from workers.llm.completion import Completion
from workers.llm.errors import CompletionError, StreamCut, StreamTimeout
from workers.llm.formats import Format, FormatSupport, JsonSchema, format_refused, reply_schema
from workers.llm.observer import Attempt, CallObserver
from workers.llm.policy import RetryPolicy, is_retryable, retry_after_s
from workers.llm.replies import content, json_object, reply_date, schema_errors
from workers.llm.usage import total_usage, usage_of

__all__ = [
    "Attempt",
    "CallObserver",
    "ChatCaller",
    "Completion",
    "CompletionError",
    "Format",
    "FormatSupport",
    "JsonSchema",
    "RetryPolicy",
    "StreamCut",
    "StreamTimeout",
    "complete",
    "content",
    "format_refused",
    "is_retryable",
    "json_object",
    "make_client",
    "reply_date",
    "reply_schema",
    "retry_after_s",
    "schema_errors",
    "total_usage",
    "usage_of",
]
