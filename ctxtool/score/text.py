"""Normalized matching of a probe against the text an agent keeps (AFTER).

Words are lower-cased runs of letters, digits and ``_``; whitespace, case and punctuation
never decide a match. A passage (a request, a constraint, an error) is kept when its words
appear in AFTER in order and contiguously, or when most of its key phrases (word 3-grams)
do; a value (a path, an id, a version) is kept when it appears, case aside.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

_WORD = re.compile(r"\w+")
SHINGLE = 3  # words per key phrase
PASSAGE_SHARE = 0.7  # share of a passage's key phrases that must be kept


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def shingles(ws: list[str], n: int = SHINGLE) -> set[str]:
    return {" ".join(ws[i : i + n]) for i in range(len(ws) - n + 1)}


@dataclass(slots=True)
class Haystack:
    """AFTER, prepared once for many probes."""

    text: str
    lower: str = ""
    joined: str = ""  # " w1 w2 ... " for contiguous word matches
    phrases: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, parts: Iterable[str]) -> Haystack:
        text = "\n".join(parts)
        ws = words(text)
        return cls(text, text.lower(), " " + " ".join(ws) + " ", shingles(ws))

    def has_value(self, value: str) -> bool:
        """A value (path, id, URL, version ...) appears, case aside."""
        v = value.strip().lower()
        return bool(v) and v in self.lower

    def has_words(self, text: str) -> bool:
        """The words of ``text`` appear in order, contiguously."""
        ws = words(text)
        return bool(ws) and f" {' '.join(ws)} " in self.joined

    def phrase_share(self, text: str) -> float:
        ph = shingles(words(text))
        if not ph:
            return 0.0
        return sum(1 for p in ph if p in self.phrases) / len(ph)

    def has_passage(self, text: str, share: float = PASSAGE_SHARE) -> bool:
        """Its words in order, or (a passage of at least 6 words) ``share`` of its key phrases."""
        if self.has_words(text):
            return True
        return len(words(text)) >= 6 and self.phrase_share(text) >= share


def one_line(text: str, limit: int = 300) -> str:
    s = re.sub(r"\s+", " ", text).strip()
    return s if len(s) <= limit else s[: limit - 1].rstrip() + "…"
