"""The built-in trigger policies, each named by what it does and the system it comes from
(``origin``): ``effective-limit`` (the Go agent's ``ShouldCompact``: window minus reserve, else
``MaxTokens``, else ``MaxMessages``), ``reserve`` (pi-style; no window, no compaction), ``ratio``
(the tool-output cache spec; a missing limit is an error), ``hard-stop`` (adk-code: 70%, stop at
95%), ``chars`` (AgentCore.Context: 200,000 / 400,000 characters). docs/architecture.md maps
them to the specification."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .base import (
    COMPACT,
    CRITICAL,
    DISABLED,
    ERROR,
    HARD_LIMIT,
    NO_LIMIT,
    OK,
    WARNING,
    Limits,
    Policy,
    Threshold,
    window_limit,
)

if TYPE_CHECKING:
    from .settings import PolicySettings


def share(window: int, ratio: float) -> int:
    """The smallest token count at or above ``window * ratio`` (rounding noise removed)."""
    return math.ceil(round(window * ratio, 6))


class EffectiveLimit(Policy):
    name = "effective-limit"
    origin = "Go agent"
    help = "Go agent: window - reserve, else max tokens, else max messages"
    keys = ("compaction.enabled", "compaction.auto_compact", "compaction.reserve_tokens", "compaction.max_tokens",
            "compaction.max_messages")

    def limits(self, window: int | None, s: PolicySettings) -> Limits:
        if not s.enabled or not s.auto_compact:
            return Limits((), "AutoCompact off", DISABLED, "compaction.auto_compact or compaction.enabled is false")
        if window and window > 0:
            lim = window_limit(window, s.reserve_tokens)
            return Limits((Threshold(self.name, "tokens", lim, f"window − {s.reserve_tokens:,} reserve", self.origin),),
                          "tokens >= window - reserve")
        if s.max_tokens > 0:
            return Limits((Threshold(self.name, "tokens", s.max_tokens, f"max_tokens {s.max_tokens:,} (no window)", self.origin),),
                          "tokens >= max_tokens")
        if s.max_messages > 0:
            th = Threshold(self.name, "messages", s.max_messages, f"{s.max_messages} messages (no limit)", self.origin)
            return Limits((th,), "messages >= max_messages", reason="no token limit: fell back to max_messages")
        return Limits((), "messages >= max_messages", OK, "no limit configured")


class Reserve(Policy):
    name = "reserve"
    origin = "pi"
    help = "pi-style: tokens > window - reserve; no window disables it"
    keys = ("compaction.enabled", "compaction.reserve_tokens")

    def limits(self, window: int | None, s: PolicySettings) -> Limits:
        rule = "tokens > window - reserve"
        if not s.enabled:
            return Limits((), rule, DISABLED, "compaction.enabled is false")
        if not window:
            return Limits((), rule, NO_LIMIT, "no context window known: compaction disabled (pi-style reserve)")
        th = Threshold(self.name, "tokens", window - s.reserve_tokens, f"> window − {s.reserve_tokens:,}", self.origin,
                       strict=True)
        return Limits((th,), rule)


class Ratio(Policy):
    name = "ratio"
    origin = "cache spec"
    help = "tool-output cache spec: tokens >= window * threshold_ratio; no window is an error"
    keys = ("compaction.enabled", "compaction.auto_compact", "compaction.threshold_ratio")

    def limits(self, window: int | None, s: PolicySettings) -> Limits:
        rule = f"tokens >= {s.threshold_ratio:g} x window"
        if not window:
            return Limits((), rule, ERROR, "no context limit known (the ratio policy is strict): give --context-window or "
                          "--model, or set context_window in ctxtool.toml")
        if not s.enabled or not s.auto_compact:
            return Limits((), rule, DISABLED, "compaction.enabled or compaction.auto_compact is false")
        th = Threshold(self.name, "tokens", share(window, s.threshold_ratio), f"{s.threshold_ratio:.0%} of window", self.origin)
        return Limits((th,), rule)


class HardStop(Policy):
    name = "hard-stop"
    origin = "adk-code"
    help = "adk-code: >= 70% compact, >= 95% hard limit"
    keys = ("compaction.enabled", "compaction.compact_threshold", "compaction.hard_limit")

    def limits(self, window: int | None, s: PolicySettings) -> Limits:
        rule = f"tokens >= {s.compact_threshold:.0%} (stop >= {s.hard_limit:.0%})"
        if not window:
            return Limits((), rule, NO_LIMIT, "no context window known")
        hard = Threshold("hard-limit", "tokens", share(window, s.hard_limit), f"{s.hard_limit:.0%} hard limit", self.origin,
                         stop=True, status=HARD_LIMIT)
        if not s.enabled:  # the hard limit stops the agent all the same
            return Limits((hard,), rule, DISABLED, "compaction.enabled is false")
        at = Threshold(self.name, "tokens", share(window, s.compact_threshold), f"{s.compact_threshold:.0%} of window",
                       self.origin, status=COMPACT)
        return Limits((at, hard), rule)


class Chars(Policy):
    name = "chars"
    origin = "AgentCore"
    help = "AgentCore.Context: warning/critical characters of agent-visible context"
    keys = ("context.warning_chars", "context.critical_chars")

    def limits(self, window: int | None, s: PolicySettings) -> Limits:
        w, c = s.warning_chars, s.critical_chars
        return Limits(
            (
                Threshold("chars-warning", "chars", w, f"{w:,} chars warning", self.origin, status=WARNING),
                Threshold("chars-critical", "chars", c, f"{c:,} chars critical", self.origin, status=CRITICAL),
            ),
            f"chars >= {w:,} (critical >= {c:,})",
        )
