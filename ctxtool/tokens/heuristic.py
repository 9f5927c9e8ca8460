"""The one token estimate without a tokenizer: ceil(characters / 4), an image a fixed ~1,200
tokens. Every heuristic count in ctxtool comes from :func:`estimate`."""

from __future__ import annotations

from collections.abc import Iterable
from math import ceil

CHARS_PER_TOKEN = 4
IMAGE_TOKENS = 1200  # an image counts as ~1,200 tokens
IMAGE_CHARS = IMAGE_TOKENS * CHARS_PER_TOKEN  # what an image adds to a message's characters


def estimate(chars: int, images: int = 0) -> int:
    """Tokens of ``chars`` characters and ``images`` images: ceil(chars / 4) + 1,200 per image."""
    return (ceil(chars / CHARS_PER_TOKEN) if chars > 0 else 0) + images * IMAGE_TOKENS


def estimates(chars: Iterable[int]) -> list[int]:
    """:func:`estimate` of each count of characters (no images), without a call per count: a
    tally's messages (a test checks it against :func:`estimate`)."""
    return [ceil(c / CHARS_PER_TOKEN) if c > 0 else 0 for c in chars]
