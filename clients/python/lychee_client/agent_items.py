"""How the OpenAI Agents SDK's items map onto the service's turns, and back (one item, one
turn): the mapping `lychee_client.agents.LycheeSession` stores and reads.

- a message (`role` user, assistant or system) whose content is visible text, as a string or
  as text parts, is a turn of that role whose content is the text: what the service segments,
  encodes and searches. It comes back as `{"role": ..., "content": text}`, the SDK's easy
  input message (ids, status and annotations of an assistant output are not kept);
- any other item (a function call, its output, a reasoning item, a message with images, a
  message with nothing visible by the service's `visible` rule) is an assistant turn spoken
  by `agents-item` whose content is the item as JSON, and comes back as it was; one that is
  no message (a tool call, its output, reasoning) is not memory (`Turn.memory` false): kept
  and replayed with the session, never made into records or found by a search, so a
  `search_memory` tool's output does not come back to it;
- a turn another client wrote comes back as the message it says; an image it showed (its
  caption) as `[image: caption]` in the text, so a caption-only turn is not an empty message.

An item longer than a turn holds (`TURN_CHARS`) is made to fit, so the run goes on: an image
or file the item carries inline (a data URL) gives way, largest first, to a text part saying
what was left out; then the longest text is cut, with a note of how much was left out (a
runaway tool output keeps its start). Binary data has no cut that stays valid: an item whose
longest value is still binary (a reasoning item's `encrypted_content`, a computer call's
screenshot) is a ValueError naming the item rather than a corrupted value replayed to the
model on every later run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from schemas.base import TURN_CHARS, visible
from schemas.exchange import turn_text

if TYPE_CHECKING:
    from agents.items import TResponseInputItem

ITEM_SPEAKER = "agents-item"
ROLES = ("user", "assistant", "system")
# keys whose long values are encoded bytes, never text (with data URLs anywhere)
BINARY_KEYS = frozenset({"encrypted_content", "file_data", "image_url", "data"})
_BASE64 = re.compile(r"[A-Za-z0-9+/=_-]{1000,}")


def _text(content: Any) -> str | None:
    """The text of a message's content, or None when it holds anything but text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and content:
        texts = [
            part.get("text")
            for part in content
            if isinstance(part, Mapping) and part.get("type") in ("input_text", "output_text")
        ]
        strings = [t for t in texts if isinstance(t, str)]
        if len(strings) == len(content):
            return "".join(strings)
    return None


def to_turn(item: Mapping[str, Any]) -> dict[str, Any]:
    """The turn that holds an item. Whether a message is text is the service's own rule
    (`visible`): one of only a zero-width space goes as JSON, as an empty one does, instead
    of being refused as a turn with nothing in it."""
    role = item.get("role")
    if role in ROLES and item.get("type", "message") == "message":
        text = _text(item.get("content"))
        if text is not None and visible(text):
            return {"role": role, "content": _cut(text, len(text) - TURN_CHARS)}
    # as written: escaped, a non-ASCII character would take six of the turn's characters
    content = json.dumps(dict(item), ensure_ascii=False)
    if len(content) > TURN_CHARS:
        content = _fitted(item, content)
    turn = {"role": "assistant", "speaker": ITEM_SPEAKER, "content": content}
    return (
        turn
        if role in ROLES and item.get("type", "message") == "message"
        else {**turn, "memory": False}
    )


def from_turn(turn: Mapping[str, Any]) -> TResponseInputItem:
    """The item a turn holds; a turn another client wrote as `ITEM_SPEAKER` whose content is
    no item (not a JSON object) comes back as the message it says, not as an error that would
    stop every later read of the session."""
    if turn.get("speaker") == ITEM_SPEAKER:
        try:
            found = json.loads(turn["content"])
        except ValueError:
            found = None
        if isinstance(found, dict):
            item: TResponseInputItem = found  # type: ignore[assignment]
            return item
    caption = turn.get("image_caption")
    text = turn_text(turn["content"], caption) if caption else turn["content"]
    message: TResponseInputItem = {"role": turn["role"], "content": text}
    return message


def _cut(text: str, excess: int) -> str:
    """`text` shorter by at least `excess` characters, its start kept and the cut said."""
    if excess <= 0:
        return text
    kept = max(len(text) - excess - 80, 0)  # room for the note
    return f"{text[:kept]} [... {len(text) - kept} characters left out: a turn holds {TURN_CHARS}]"


def _fitted(item: Mapping[str, Any], content: str) -> str:
    """An item's JSON (`content`) within a turn: inline images and files first, largest
    first, then its longest text (see the module's docstring)."""
    value = json.loads(content)  # a copy of its own to change
    for part in sorted(_inline_parts(value), key=lambda p: len(_data_of(p)), reverse=True):
        note = _left_out(part)
        part.clear()
        part.update(type="input_text", text=note)
        content = json.dumps(value, ensure_ascii=False)
        if len(content) <= TURN_CHARS:
            return content
    if _shorten(value, len(content) - TURN_CHARS, item):
        content = json.dumps(value, ensure_ascii=False)
    return _cut(content, len(content) - TURN_CHARS)  # no string held enough: as text


def _inline_parts(value: dict[str, Any]) -> list[dict[str, Any]]:
    """The image and file parts that carry their data inline (a data URL), of a message's
    content or a tool output's list of parts."""
    lists = [value.get("content"), value.get("output")]
    return [
        part
        for parts in lists
        if isinstance(parts, list)
        for part in parts
        if isinstance(part, dict) and _data_of(part).startswith("data:")
    ]


def _data_of(part: dict[str, Any]) -> str:
    kind = part.get("type")
    data = part.get("image_url" if kind == "input_image" else "file_data")
    return data if kind in ("input_image", "input_file") and isinstance(data, str) else ""


def _left_out(part: dict[str, Any]) -> str:
    """What a part left out says, for the model that reads the history: a text part in the
    place of the image or file, which the model API takes where a cut data URL would fail."""
    data = _data_of(part)
    media = data[len("data:") : data.find(";")] if ";" in data else "data"
    named = f", {part['filename']}" if isinstance(part.get("filename"), str) else ""
    what = "an image" if part.get("type") == "input_image" else "a file"
    payload = data.partition(",")[2]
    size = len(payload) * 3 // 4 - payload[-2:].count("=")  # base64: 3 bytes in 4 characters
    return (
        f"[{what} ({media}{named}) of about {size} bytes was here; it is left out of the "
        f"stored history: a turn of the memory service holds {TURN_CHARS} characters]"
    )


def _binary(key: object, text: str) -> bool:
    """Whether a string is encoded bytes, which a cut corrupts: a data URL, or a long run of
    base64 (with digits and not letters only, as no runaway text is) under a key that holds
    bytes."""
    if text.startswith("data:"):
        return True
    head = text[:4096]
    mixed = any(c.isdigit() for c in head) and not head.isalpha()
    return key in BINARY_KEYS and mixed and _BASE64.fullmatch(text) is not None


def _shorten(value: dict[str, Any], excess: int, item: Mapping[str, Any]) -> bool:
    """Cut `value`'s longest string by `excess` characters, in place, when it has that many
    (a character cut is at least one of the JSON's, so one cut is enough); binary data is
    never cut, a ValueError naming the item instead."""
    found: tuple[int, Any, Any] = (-1, None, None)  # length, container, key
    stack: list[Any] = [value]
    while stack:
        node = stack.pop()
        pairs = node.items() if isinstance(node, dict) else enumerate(node)
        for key, child in pairs:
            if isinstance(child, str) and len(child) > found[0]:
                found = (len(child), node, key)
            elif isinstance(child, dict | list):
                stack.append(child)
    length, container, key = found
    if length >= 0 and _binary(key, container[key]):
        ident = item.get("id") or item.get("call_id")
        named = f" {ident!r}" if isinstance(ident, str) else ""
        raise ValueError(
            f"the {item.get('type', 'message')} item{named} is more than the {TURN_CHARS} "
            f"characters a turn of the memory service holds, and its largest value ({key!r}, "
            f"{length} characters) is binary data, which a cut would corrupt; it is not stored"
        )
    if length <= excess:
        return False
    container[key] = _cut(container[key], excess)
    return True
