"""Normalized matching of a probe against a summary, score's own word rules: words are lower-cased
runs of letters, digits and ``_``; a probe's key words are its content words (stop words and
reactions dropped, three letters or more, stemmed), at most :data:`KEY_WORDS`. A passage is kept
when some window of the summary holds :data:`PASSAGE_SHARE` of its key words (a paraphrase
counts, a bag of words spread over the summary does not); a value when it appears, case aside.
No summarizer and no part of compaction uses these rules."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable

from ..text import lazyre

_WORD = lazyre.compile(r"\w+")
SHINGLE = 3  # words per key phrase (the quality rules' echo test)
KEY_WORDS = 15  # key words of a passage, at most (a request's ask comes first)
PASSAGE_SHARE = 0.6  # share of a passage's key words a window of the summary must hold
WINDOW_MIN = 40  # content words per window, at least ...
WINDOW_PER_KEY = 4  # ... or this many per key word

STOPWORDS = frozenset("""
a about above after again against all also am an and any are aren as at be because been before being below
between both but by can cannot could couldn did didn do does doesn doing don down during each else etc even
ever every few for from further had hadn has hasn have haven having he her here hers herself him himself his how
i if in into is isn it its itself just let lets like ll may me might more most much must mustn my myself need
needs no nor not now of off on once one only or other our ours ourselves out over own per please re same shall
shan she should shouldn so some still such than that the their theirs them themselves then there these they
this those though through to too under until up upon us use used using ve very via want wants was wasn way we
well were weren what when where which while who whom why will with within without won would wouldn yes yet you
your yours yourself yourselves
""".split())
#: words of reaction and narration: never what a probe is about
REACTIONS = frozenset("""
ok okay alright sure thanks thank great good nice cool fine perfect awesome yeah yep nope hmm continue go ahead
looks look looking seems seem think thought sounds right got done let's lets try again sorry wait now next
also really actually maybe probably just something anything everything thing things stuff bit lot time
""".split())


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def stem(w: str) -> str:
    """A crude, fixed suffix rule: plurals, -ing, -ed, -ly (so "fixing"/"fixed"/"fixes" meet)."""
    for suf, keep in (("ing", 4), ("ies", 3), ("ed", 4), ("es", 4), ("ly", 4), ("s", 4)):
        if w.endswith(suf) and len(w) - len(suf) >= keep:
            return w[: -len(suf)] + ("y" if suf == "ies" else "")
    return w


def content_words(text: str) -> list[str]:
    """The stemmed content words of ``text`` in order (repeats kept)."""
    return [stem(w) for w in words(text) if len(w) >= 3 and w not in STOPWORDS and w not in REACTIONS
            and not w.isdigit()]


def key_words(text: str, cap: int = KEY_WORDS) -> list[str]:
    """The distinct content words of ``text`` in order of first appearance, at most ``cap``."""
    return list(dict.fromkeys(content_words(text)))[:cap]


def shingles(ws: list[str], n: int = SHINGLE) -> set[str]:
    return {" ".join(ws[i : i + n]) for i in range(len(ws) - n + 1)}


class Haystack:
    """A text prepared once for many probes (its word forms only when a probe needs them)."""

    __slots__ = ("_content", "_joined", "_phrases", "_where", "lower", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.lower = text.lower()
        self._joined: str | None = None
        self._phrases: set[str] | None = None
        self._content: list[str] | None = None
        self._where: dict[str, list[int]] | None = None

    @classmethod
    def of(cls, parts: Iterable[str]) -> Haystack:
        return cls("\n".join(parts))

    @property
    def joined(self) -> str:
        """" w1 w2 ... ": the words, for contiguous matches."""
        if self._joined is None:
            self._joined = " " + " ".join(_WORD.findall(self.lower)) + " "
        return self._joined

    @property
    def phrases(self) -> set[str]:
        if self._phrases is None:
            self._phrases = shingles(self.joined.split())
        return self._phrases

    @property
    def where(self) -> dict[str, list[int]]:
        """Each content word's positions in the text's content-word sequence."""
        if self._where is None:
            self._content = content_words(self.text)
            where: dict[str, list[int]] = {}
            for i, w in enumerate(self._content):
                where.setdefault(w, []).append(i)
            self._where = where
        return self._where

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

    def overlap(self, keys: list[str]) -> float:
        """The largest share of ``keys`` (key words) that one window of this text holds."""
        if not keys:
            return 0.0
        where = self.where
        hits = sorted((i, k) for k in set(keys) for i in where.get(k, ()))
        if not hits:
            return 0.0
        width = max(WINDOW_MIN, WINDOW_PER_KEY * len(keys))
        have: Counter[str] = Counter()
        best = lo = 0
        for i, k in hits:
            have[k] += 1
            while hits[lo][0] <= i - width:
                old = hits[lo][1]
                have[old] -= 1
                if not have[old]:
                    del have[old]
                lo += 1
            best = max(best, len(have))
        return best / len(set(keys))

    def has_keys(self, keys: list[str], share: float = PASSAGE_SHARE) -> bool:
        """One window holds ``share`` of ``keys`` (at least two of them, or the one)."""
        n = len(set(keys))
        return n > 0 and self.overlap(keys) * n >= max(min(2, n), math.ceil(share * n - 1e-9))
