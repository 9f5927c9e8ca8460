"""Normalized matching of a probe against the text an agent keeps (AFTER).

Words are lower-cased runs of letters, digits and ``_``; whitespace, case and punctuation
never decide a match. A passage (a request, a constraint, an error) is kept when its words
appear in AFTER in order and contiguously, or when most of its key phrases (word 3-grams)
do; a value (a path, an id, a version) is kept when it appears, case aside.
"""

from __future__ import annotations

from collections.abc import Iterable

from .. import lazyre

_WORD = lazyre.compile(r"\w+")
SHINGLE = 3  # words per key phrase
PASSAGE_SHARE = 0.7  # share of a passage's key phrases that must be kept


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def shingles(ws: list[str], n: int = SHINGLE) -> set[str]:
    return {" ".join(ws[i : i + n]) for i in range(len(ws) - n + 1)}


class Haystack:
    """AFTER, prepared once for many probes (its key phrases only when a probe needs them)."""

    __slots__ = ("_joined", "_phrases", "lower", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.lower = text.lower()
        self._joined: str | None = None
        self._phrases: set[str] | None = None

    @property
    def joined(self) -> str:
        """" w1 w2 ... ": the words, for contiguous matches."""
        if self._joined is None:
            self._joined = " " + " ".join(_WORD.findall(self.lower)) + " "
        return self._joined

    @classmethod
    def of(cls, parts: Iterable[str]) -> Haystack:
        return cls("\n".join(parts))

    @property
    def phrases(self) -> set[str]:
        if self._phrases is None:
            self._phrases = shingles(self.joined.split())
        return self._phrases

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
