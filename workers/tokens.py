"""Token counting with tiktoken's o200k_base, offline.

tiktoken downloads its BPE files on first use; here they come from the files the
`litellm` wheel ships (named by the SHA-1 of their download address, which is the
layout `TIKTOKEN_CACHE_DIR` expects).
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

ENCODING = "o200k_base"
MESSAGE_OVERHEAD_TOKENS = 4  # role and separators of one chat message


def _offline_cache_dir() -> str | None:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"
    return str(path) if path.is_dir() else None


@lru_cache(maxsize=4)
def encoding(name: str = ENCODING) -> Any:
    if "TIKTOKEN_CACHE_DIR" not in os.environ:
        cache = _offline_cache_dir()
        if cache:
            os.environ["TIKTOKEN_CACHE_DIR"] = cache
    import tiktoken

    return tiktoken.get_encoding(name)


# o200k_base's pre-tokenizer never joins a line break to a visible ASCII character after it
# other than "/" (a run of punctuation takes the line breaks and slashes that follow it), and
# BPE merges only within its pieces; so a text's count is the sum of its lines' counts cut
# there, and each line's count is kept: evidence lines recur from request to request.
_LINE = re.compile(r"(?<=\n)(?=[!-.0-~])")
_KEPT_CHARS = 4096  # a longer line is counted, not kept


def count_tokens(text: str) -> int:
    return sum(
        _line_tokens(line) if len(line) <= _KEPT_CHARS else _tokens(line)
        for line in _LINE.split(text)
    )


@lru_cache(maxsize=16384)
def _line_tokens(line: str) -> int:
    return _tokens(line)


def _tokens(text: str) -> int:
    return len(encoding().encode(text, disallowed_special=()))


def prompt_tokens(messages: Sequence[dict[str, str]]) -> int:
    """Tokens chat messages cost as input: content plus a fixed per-message overhead."""
    return sum(count_tokens(m["content"]) + MESSAGE_OVERHEAD_TOKENS for m in messages)
