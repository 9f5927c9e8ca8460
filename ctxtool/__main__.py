"""``python -m ctxtool``."""

from .cli import entry

entry()
