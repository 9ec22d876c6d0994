"""The segment-encoding prompt (paper App. C.2, E.1) and the shape of its JSON reply.

The rules live here as one module so that the encoder, the offline token estimate and
the tests read the same text; the reply models sit beside them because the two change
together.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from schemas import Segment
from schemas.records import (
    DISAMBIGUATION_MAX_CHARS,
    SEMANTIC_TEXT_MAX_CHARS,
    MemoryType,
    SourceRole,
)
from workers.encoder.encoded import segment_turns
from workers.llm.formats import JsonSchema, reply_schema
from workers.llm.replies import reply_date

# Role markers and separators of the chat format; a fixed estimate keeps the count
# offline and provider-neutral (OpenAI documents 3-4 tokens per message).

SYSTEM_PROMPT = """\
You turn a chunk of conversation into memory records. Every record must make sense on its \
own, read months later by someone who never saw the conversation.

## What you receive
- <SESSION_DATE>: the day the conversation took place (YYYY-MM-DD); it anchors relative \
dates. It can be empty.
- <REFERENCE_CONTEXT>: notes left by earlier chunks of the same session. Use them only to \
work out who or what a reference points to. Never take a record from them.
- <CURRENT_TURNS>: the turns to extract from, one per line as "[i] Speaker: text". \
evidence_turns holds these 0-based indexes i.
- <EARLIER_RECORDS>: records already stored from earlier conversations about the same \
subjects, one per line as "[E j] (said YYYY-MM-DD) text". It can be empty. Never take a \
record from them.

## Rules
1. One fact per record. Write semantic_text as a complete standalone sentence: replace \
every pronoun, alias and implicit subject with the explicit person, thing or place it \
refers to. Keep exact names, quantities, dates, places, reasons and outcomes.
2. When a session date is given, turn relative dates ("yesterday", "last week", "next \
Friday") into absolute ISO dates (YYYY-MM-DD, or YYYY-MM / YYYY when only that is known), \
both in semantic_text and in temporal.
3. The text of a turn can itself start with a speaker name ("Ines: ..."); that name is \
the real speaker, whatever the turn's role says.
4. When a named speaker says "I", "me" or "my", write that speaker's name. Do not call a \
named speaker "the user"; say "the user" only when no name is known.
5. Keep what a participant says about themselves and their work: durable facts, \
preferences, instructions on how they want things done ("always ...", "never ...", with \
when they apply in their words: "... when Ines asks about deadlines"), plans, decisions, \
constraints, dates and events, also when said in the same sentence as a question \
("I prefer short answers, so can you ...?"), and who they are (a role, an age, a place) as a \
record of its own when a long request says it in passing ("... for my career as a nurse in \
Porto"). Skip greetings, filler, acknowledgements, generic \
encouragement and general world knowledge.
6. From an assistant's turn keep only what concerns this user: what was decided or agreed, \
what it recommended for them, what it promised to do. Never a record for each line of a \
general explanation or tutorial, never a bare acknowledgement such as "OK" or "Noted".
7. Code, tables and headings are not records; when one matters, one record says what it is \
for (for example which file or function it defines).
8. Return disambiguation_context: a short note (at most 1200 characters) of the resolved \
speaker names, aliases, relationships and dates a later chunk will need. Empty string if \
there is nothing to note.
9. When nothing durable was said, return {"records": [], "disambiguation_context": ""}.
10. When a record of yours gives a new value to what an earlier record states (the same \
subject and attribute: a number changed, a plan replaced, a preference reversed), put that \
earlier record's index j in its supersedes. When it cannot hold together with an earlier \
record and nothing says which is right, put j in its contradicts. When unsure, leave both \
empty.

## memory_type
- fact: a stable attribute, relationship or state
- preference: a like, dislike, habit or recurring choice
- event: a dated one-off occurrence
- constraint: a limit, policy, restriction or standing instruction
- procedure: reusable steps or a workflow
- failure_pattern: a mistake, pitfall or lesson learned
- tool_affordance: what a tool can or cannot do

## Output
Reply with one raw JSON object and nothing else (no markdown, no code fences):
{
  "records": [
    {
      "memory_type": "fact | preference | event | constraint | procedure | \
failure_pattern | tool_affordance",
      "semantic_text": "one complete standalone sentence",
      "entities": ["named entity worth searching for"],
      "temporal": {"t_ref": "", "t_valid_from": "", "t_valid_to": ""},
      "tags": ["short keyword"],
      "evidence_turns": [0],
      "source_role": "user | assistant | both",
      "supersedes": [],
      "contradicts": []
    }
  ],
  "disambiguation_context": ""
}
"""

USER_TEMPLATE = """\
<SESSION_DATE>{session_date}</SESSION_DATE>
<REFERENCE_CONTEXT>
{reference_context}
</REFERENCE_CONTEXT>

<EARLIER_RECORDS>
{earlier_records}
</EARLIER_RECORDS>

<CURRENT_TURNS>
{current_turns}
</CURRENT_TURNS>"""

REPAIR_TEMPLATE = """\
Your reply could not be used: {reason}
Reply again with the corrected result: one raw JSON object in the output format of the \
instructions, evidence_turns between 0 and {last_index}, and nothing else."""


def build_messages(
    segment: Segment, reference_context: str, earlier: Sequence[EarlierRecord] = ()
) -> list[dict[str, str]]:
    """[system, user]: the rules, then the session date, reference notes, the earlier records
    the new ones may update (indexed for `supersedes`) and the indexed turns."""
    date = segment.session_date.date().isoformat() if segment.session_date else ""
    # One line per turn: the indexes are what evidence_turns points back to.
    lines = [
        f"[{i}] {speaker}: {' '.join(text.split())}"
        for i, (_, speaker, text) in enumerate(segment_turns(segment))
    ]
    user = USER_TEMPLATE.format(
        session_date=date,
        reference_context=reference_context.strip(),
        earlier_records="\n".join(
            f"[E{j}] (said {e.said_on or 'unknown'}) {' '.join(e.text.split())}"
            for j, e in enumerate(earlier)
        ),
        current_turns="\n".join(lines),
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def repair_message(reason: str, n_turns: int) -> dict[str, str]:
    """The one follow-up that shows the model what was wrong with its reply."""
    return {
        "role": "user",
        "content": REPAIR_TEMPLATE.format(reason=reason, last_index=max(n_turns - 1, 0)),
    }


# --- the reply -------------------------------------------------------------------------

_ISO = re.compile(r"\d{4}(-(0[1-9]|1[0-2])(-\d{2})?)?")


class ReplyTemporal(BaseModel):
    """Dates as the model writes them; obvious blanks become "" and timestamps a day."""

    model_config = ConfigDict(extra="ignore")

    t_ref: str = ""
    t_valid_from: str = ""
    t_valid_to: str = ""

    @field_validator("t_ref", "t_valid_from", "t_valid_to", mode="before")
    @classmethod
    def _iso(cls, v: Any) -> str:
        text = reply_date(v)
        if not isinstance(text, str):
            text = str(text)
        if text and not _ISO.fullmatch(text):
            raise ValueError(f"must be YYYY, YYYY-MM, YYYY-MM-DD or empty (got {text!r})")
        if len(text) == 10:
            date.fromisoformat(text)  # a real calendar day, as `Temporal` will insist
        return text


@dataclass(frozen=True)
class EarlierRecord:
    """A stored record a segment's new records may update, as the prompt shows it."""

    record_id: str
    text: str
    said_on: str = ""  # YYYY-MM-DD of the conversation, "" when unknown


class ReplyRecord(BaseModel):
    model_config = ConfigDict(extra="ignore")

    memory_type: MemoryType
    semantic_text: str = Field(default="", max_length=SEMANTIC_TEXT_MAX_CHARS)
    entities: list[str] = Field(default_factory=list)
    temporal: ReplyTemporal = Field(default_factory=ReplyTemporal)
    tags: list[str] = Field(default_factory=list)
    evidence_turns: list[int] = Field(default_factory=list)
    source_role: SourceRole = ""
    supersedes: list[int] = Field(default_factory=list)  # indexes of <EARLIER_RECORDS>
    contradicts: list[int] = Field(default_factory=list)

    @field_validator("memory_type", mode="before")
    @classmethod
    def _type(cls, v: Any) -> Any:
        # "Failure pattern" and "failure-pattern" are the same answer; anything else is not.
        return "_".join(v.strip().lower().replace("-", " ").split()) if isinstance(v, str) else v

    @field_validator("semantic_text", mode="before")
    @classmethod
    def _text(cls, v: Any) -> Any:
        return "" if v is None else v

    @field_validator("source_role", mode="before")
    @classmethod
    def _role(cls, v: Any) -> Any:
        return "" if v is None else v.strip().lower() if isinstance(v, str) else v

    @field_validator(
        "entities", "tags", "evidence_turns", "supersedes", "contradicts", mode="before"
    )
    @classmethod
    def _list(cls, v: Any) -> Any:
        if v is None:
            return []
        return [v] if isinstance(v, str | int) else v

    @field_validator("temporal", mode="before")
    @classmethod
    def _temporal(cls, v: Any) -> Any:
        return {} if v is None else v

    @field_validator("evidence_turns")
    @classmethod
    def _in_range(cls, v: list[int], info: ValidationInfo) -> list[int]:
        n = (info.context or {}).get("n_turns")
        if n is not None:
            bad = [i for i in v if not 0 <= i < n]
            if bad:
                raise ValueError(f"indexes {bad} are outside the turns 0..{n - 1}")
        return v

    @field_validator("supersedes", "contradicts")
    @classmethod
    def _earlier(cls, v: list[int], info: ValidationInfo) -> list[int]:
        n = (info.context or {}).get("n_earlier", 0)
        bad = [j for j in v if not 0 <= j < n]
        if bad:
            raise ValueError(f"indexes {bad} are not earlier records (0..{n - 1})")
        return v


class EncoderReply(BaseModel):
    """The JSON object the encoder asks for; validate with context={"n_turns": n}."""

    model_config = ConfigDict(extra="ignore")

    records: list[ReplyRecord] = Field(default_factory=list)
    disambiguation_context: str = ""

    @field_validator("records", mode="before")
    @classmethod
    def _records(cls, v: Any) -> Any:
        return [] if v is None else v

    @field_validator("disambiguation_context", mode="before")
    @classmethod
    def _note(cls, v: Any) -> Any:
        if v is None:
            return ""
        if isinstance(v, dict | list):
            v = json.dumps(v, ensure_ascii=False)
        return v[:DISAMBIGUATION_MAX_CHARS].strip() if isinstance(v, str) else v


_REPLY_SCHEMA = reply_schema(EncoderReply)


LIST_MAX_ITEMS = 8  # entities or tags of one record
RECORDS_PER_TURN = 3


def reply_schema_for(n_turns: int, n_earlier: int = 0) -> JsonSchema:
    """The reply's JSON schema for a segment of `n_turns` turns: evidence_turns limited to
    its indexes, the error small models make most after malformed JSON, and every list
    bounded (a few records a turn, a few entities and tags a record, each turn cited once):
    a small model at temperature 0 can otherwise repeat a list item until its token cap,
    seen with Qwen2.5-Coder-1.5B on a one-turn segment. Item counts cost a grammar a few
    rules, unlike string lengths."""
    n = max(n_turns, 1)
    schema = copy.deepcopy(_REPLY_SCHEMA)
    records = schema["properties"]["records"]
    records["maxItems"] = RECORDS_PER_TURN * n
    fields = records["items"]["properties"]
    fields["evidence_turns"].update(maxItems=n)
    fields["evidence_turns"]["items"].update(minimum=0, maximum=n - 1)
    for name in ("entities", "tags"):
        fields[name]["maxItems"] = LIST_MAX_ITEMS
    for name in ("supersedes", "contradicts"):  # only the earlier records shown
        fields[name]["maxItems"] = n_earlier
        if n_earlier:
            fields[name]["items"].update(minimum=0, maximum=n_earlier - 1)
    return schema
