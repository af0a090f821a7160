"""Lexical terms for Postgres full-text search without language extensions.

Policy: Latin-script words and numbers become lower-case terms, and an English word whose
Snowball stem differs from it adds the stem too ("hiking" → "hiking", "hike"), so inflected
forms meet; each run of CJK characters becomes its overlapping character bigrams (a single
character stays a unigram), so Chinese and Japanese match without a segmenter. The store
builds the tsvector from these exact terms (`array_to_tsvector`), so Postgres's parser and
locale never change them. Chunks written before stems existed match the stem-free terms.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

import snowballstemmer

from app.core.pace import pace

MAX_TERM_CHARS = 64

_CJK = (
    r"\u3040-\u30ff"  # Hiragana, Katakana
    r"\u3400-\u4dbf"  # CJK Extension A
    r"\u4e00-\u9fff"  # CJK Unified Ideographs
    r"\uac00-\ud7af"  # Hangul syllables
    r"\uf900-\ufaff"  # CJK compatibility ideographs
)
_TOKEN = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+(?:[.\-_][^\W_{_CJK}]+)*")
_CJK_RUN = re.compile(rf"^[{_CJK}]+$")


def _cjk_bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


_STEMMER = snowballstemmer.stemmer("english")
_WORD = re.compile(r"^[a-z]{4,}$")  # plain English-looking words; codes and numbers stay whole


@lru_cache(maxsize=65536)
def english_stem(word: str) -> str:
    return str(_STEMMER.stemWord(word)) if _WORD.match(word) else word


def lexical_terms(text: str) -> list[str]:
    """Terms in order of appearance, duplicates kept (callers may dedupe)."""
    pace()
    terms: list[str] = []
    for match in _TOKEN.finditer(text.lower()):
        token = match.group()
        if _CJK_RUN.match(token):
            terms.extend(_cjk_bigrams(token))
            continue
        word = token[:MAX_TERM_CHARS]
        terms.append(word)
        stem = english_stem(word)
        if stem != word:
            terms.append(stem)
    return terms


def distinct_terms(text: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(lexical_terms(text)))


@lru_cache(maxsize=4096)
def term_set(text: str) -> frozenset[str]:
    """The text's terms as a set, remembered: recall scores the same archived chunks turn
    after turn, and tokenizing their text was the largest Python cost of a recalling turn."""
    return frozenset(lexical_terms(text))


_SENTENCE_END = re.compile(r"(?<=[.!?。！？;；\n])")


def sentences(text: str) -> list[str]:
    """The text cut after each sentence end (Latin and CJK punctuation, line breaks); the
    pieces joined give the text back."""
    pace()
    return [piece for piece in _SENTENCE_END.split(text) if piece]


def likeliest_rare(terms: Sequence[str], cap: int) -> list[str]:
    """At most `cap` of the terms, those likeliest to be rare kept: the longest first (rare
    words run long: Zipf's law of abbreviation), ties in their order. The lexical search ranks
    by IDF among the terms kept; a long query's many short, common words would only widen the
    set of chunks it has to rank."""
    if len(terms) <= cap:
        return list(terms)
    order = sorted(range(len(terms)), key=lambda i: (-len(terms[i]), i))
    kept = set(order[:cap])
    return [term for i, term in enumerate(terms) if i in kept]
