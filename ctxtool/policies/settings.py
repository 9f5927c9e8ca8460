"""The values of the trigger policies' settings: the config keys every registered policy
reads (:mod:`ctxtool.policies`), their defaults, and the window they apply to."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..config import BY_KEY
from ..tokens.context import ContextSettings
from . import all_keys, extra_settings
from .base import window_limit

#: keyword names accepted by :class:`PolicySettings` for the built-in keys
NAMED = {
    "reserve_tokens": "compaction.reserve_tokens",
    "max_tokens": "compaction.max_tokens",
    "max_messages": "compaction.max_messages",
    "threshold_ratio": "compaction.threshold_ratio",
    "compact_threshold": "compaction.compact_threshold",
    "hard_limit": "compaction.hard_limit",
    "enabled": "compaction.enabled",
    "auto_compact": "compaction.auto_compact",
    "warning_chars": "context.warning_chars",
    "critical_chars": "context.critical_chars",
}


def default(key: str) -> Any:
    """A setting's default: the config table's, or the one a registered policy declares."""
    s = BY_KEY.get(key)
    if s is None:
        s = next((x for x in extra_settings() if x.key == key), None)
    if s is None:
        raise KeyError(key)
    return s.default


class PolicySettings:
    """The values of the policies' config keys (defaults where not given) and the window
    they apply to. ``s["compaction.reserve_tokens"]`` or ``s.reserve_tokens``;
    :meth:`from_config` reads every registered policy's keys from a ``Config``."""

    __slots__ = ("_values", "context_window", "window_source")

    def __init__(
        self,
        context_window: int | None = None,
        window_source: str = "none",
        values: Mapping[str, Any] | None = None,
        **named: Any,
    ) -> None:
        self.context_window = context_window or None
        self.window_source = window_source if self.context_window else "none"
        vals = dict(values or {})
        for n, v in named.items():
            if n not in NAMED:
                raise TypeError(f"unknown policy setting {n!r}")
            vals[NAMED[n]] = v
        self._values = vals

    @classmethod
    def from_config(cls, cfg: Any, *, context_window: int | None = None, window_source: str | None = None) -> PolicySettings:
        """Every registered policy's keys from ``cfg``; the window given, else the one the
        flags and config name (:meth:`ctxtool.tokens.context.ContextSettings.from_config`)."""
        if context_window is None:
            w = ContextSettings.from_config(cfg).resolve(None)
            context_window, window_source = w.window, w.source
        return cls(context_window, window_source or "flag", {k: cfg[k] for k in all_keys()})

    def with_window(self, window: int | None, source: str) -> PolicySettings:
        return PolicySettings(window, source, self._values)

    def __getitem__(self, key: str) -> Any:
        return self._values[key] if key in self._values else default(key)

    def __repr__(self) -> str:
        return f"PolicySettings(context_window={self.context_window!r}, values={self._values!r})"

    reserve_tokens = property(lambda self: int(self["compaction.reserve_tokens"]))
    max_tokens = property(lambda self: int(self["compaction.max_tokens"]))
    max_messages = property(lambda self: int(self["compaction.max_messages"]))
    threshold_ratio = property(lambda self: float(self["compaction.threshold_ratio"]))
    compact_threshold = property(lambda self: float(self["compaction.compact_threshold"]))
    hard_limit = property(lambda self: float(self["compaction.hard_limit"]))
    enabled = property(lambda self: bool(self["compaction.enabled"]))
    auto_compact = property(lambda self: bool(self["compaction.auto_compact"]))
    warning_chars = property(lambda self: int(self["context.warning_chars"]))
    critical_chars = property(lambda self: int(self["context.critical_chars"]))

    def effective_limit(self) -> tuple[int | None, str]:
        """The Go agent's ``EffectiveTokenLimit``: window minus reserve, else ``MaxTokens``, else none."""
        if self.context_window and self.context_window > 0:
            return window_limit(self.context_window, self.reserve_tokens), "context_window - reserve_tokens"
        if self.max_tokens and self.max_tokens > 0:
            return self.max_tokens, "max_tokens"
        return None, "none"

    def cut_limit(self, cfg: Any) -> int | None:
        """The limit that clamps a cut's keep budget (``ctxtool cut``): the effective limit, where
        ``max_tokens`` counts only when configured (its default is no limit to cut against)."""
        limit, source = self.effective_limit()
        if source == "max_tokens" and cfg.source("compaction.max_tokens") == "default":
            return None
        return limit

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"context_window": self.context_window, "window_source": self.window_source}
        short = {v: k for k, v in NAMED.items()}
        for k in all_keys():
            d[short.get(k, k)] = self[k]
        return d
