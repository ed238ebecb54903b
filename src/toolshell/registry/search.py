"""`tools search`: BM25 ranking over tool names, server names, descriptions and parameters.

Each tool is one document made of weighted fields (a simplified BM25F: a term's frequency is the
sum of its field weights, and so is the document length). The tool name weighs most, so a query
word in a name beats the same word in a description.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from toolshell.registry.entry import ToolEntry

NAME_WEIGHT = 3.0
PARAM_NAME_WEIGHT = 1.5
SERVER_WEIGHT = 1.0
DESCRIPTION_WEIGHT = 1.0
PARAM_DESCRIPTION_WEIGHT = 0.5

_K1 = 1.2
_B = 0.75
_MAX_DEPTH = 3


@dataclass(frozen=True)
class SearchHit:
    """One result of `tools search`: the tool and its BM25 score (higher is better)."""

    entry: ToolEntry
    score: float


def tokenize(text: str) -> list[str]:
    """Split text into lower-case terms on non-alphanumerics and camelCase (`listPulls` → list, pull).

    A trailing plural `s` is dropped (`pulls` → `pull`) so singular and plural query words meet.
    """
    terms: list[str] = []
    for chunk in "".join(ch if ch.isalnum() else " " for ch in text).split():
        words = _camel_words(chunk) if chunk.isascii() else [chunk]
        terms += [_singular(w.lower()) for w in words]
    return terms


def _camel_words(chunk: str) -> list[str]:
    """`HTTPServer2go` -> `HTTP`, `Server`, `2`, `go`: an ASCII chunk split in one pass (names and
    descriptions come from servers, so no backtracking regex reads them)."""
    words: list[str] = []
    i, n = 0, len(chunk)
    while i < n:
        j = _run_end(chunk, i, str.isupper)
        if j > i + 1 and j < n and chunk[j].islower():
            j -= 1  # `HTTPServer`: the last capital starts the next word
        elif j <= i + 1:
            j = _run_end(chunk, j, str.islower) if j > i or chunk[i].islower() else _run_end(chunk, i, str.isdigit)
        words.append(chunk[i:j])
        i = j
    return words


def _run_end(text: str, i: int, test: Callable[[str], bool]) -> int:
    while i < len(text) and test(text[i]):
        i += 1
    return i


def _singular(term: str) -> str:
    return term[:-1] if len(term) > 3 and term.endswith("s") and not term.endswith("ss") else term


def _parameters(schema: Any, depth: int = 0) -> Iterator[tuple[str, str]]:
    """(name, description) of every property, nested objects and array items included."""
    if not isinstance(schema, dict) or depth > _MAX_DEPTH:
        return
    properties = schema.get("properties")
    for name, sub in properties.items() if isinstance(properties, dict) else ():
        description = sub.get("description", "") if isinstance(sub, dict) else ""
        yield name, description if isinstance(description, str) else ""
        yield from _parameters(sub, depth + 1)
    yield from _parameters(schema.get("items"), depth + 1)


def _document(entry: ToolEntry) -> dict[str, float]:
    """Term -> weighted frequency over the tool's fields."""
    doc: dict[str, float] = {}

    def add(text: str, weight: float) -> None:
        for term in tokenize(text):
            doc[term] = doc.get(term, 0.0) + weight

    add(entry.name, NAME_WEIGHT)
    add(entry.server or "", SERVER_WEIGHT)
    add(entry.description, DESCRIPTION_WEIGHT)
    for name, description in _parameters(entry.input_schema):
        add(name, PARAM_NAME_WEIGHT)
        add(description, PARAM_DESCRIPTION_WEIGHT)
    return doc


class SearchIndex:
    """A BM25 index over tool entries, built once per catalog."""

    def __init__(self, entries: Sequence[ToolEntry]) -> None:
        self._entries = list(entries)
        self._docs = [_document(e) for e in self._entries]
        self._lengths = [sum(d.values()) for d in self._docs]
        self._avg_length = (sum(self._lengths) / len(self._lengths)) if self._lengths else 1.0
        self._df: Counter[str] = Counter(term for doc in self._docs for term in doc)

    def _idf(self, term: str) -> float:
        n, df = len(self._docs), self._df[term]
        return math.log(1 + (n - df + 0.5) / (df + 0.5))

    def search(self, query: str, limit: int = 10) -> list[SearchHit]:
        """The best `limit` tools for the query words, best first; ties keep catalog order."""
        terms = list(dict.fromkeys(tokenize(query)))
        scored: list[tuple[float, int]] = []
        for i, (doc, length) in enumerate(zip(self._docs, self._lengths, strict=True)):
            norm = _K1 * (1 - _B + _B * length / self._avg_length)
            tfs = [(t, doc[t]) for t in terms if t in doc]
            score = sum(self._idf(t) * tf * (_K1 + 1) / (tf + norm) for t, tf in tfs)
            if score > 0:
                scored.append((score, i))
        scored.sort(key=lambda s: (-s[0], s[1]))
        return [SearchHit(self._entries[i], score) for score, i in scored[: max(limit, 0)]]
