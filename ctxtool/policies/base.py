"""What a trigger policy is: its thresholds over a measured context, and one verdict rule.

A policy says, for a context window and its settings, which thresholds apply
(:meth:`Policy.limits`); the verdict (:meth:`Policy.evaluate`), the turns at which
``replay`` sees it fire and the level ``stats`` shows all come from those thresholds, so
``check``, ``compact``, ``replay``, ``stats`` and the transform cannot disagree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ..config import BY_KEY, Setting
from ..tokens.heuristic import estimate

OK = "ok"
COMPACT = "compact"
HARD_LIMIT = "hard_limit"  # adk-code: the agent stops
WARNING = "warning"  # AgentCore.Context
CRITICAL = "critical"  # AgentCore.Context
DISABLED = "disabled"
NO_LIMIT = "no_limit"  # no threshold can be computed (pi-style reserve without a window)
ERROR = "error"  # the ratio policy is strict: no context limit
#: statuses that call for compaction (the exit status of ``check``)
ACTING = (COMPACT, HARD_LIMIT, CRITICAL)

METRICS = ("tokens", "chars", "messages")


def window_limit(window: int, reserve_tokens: int) -> int:
    """The token limit of a known context window: the window minus the reserve, never below 0.
    0 is a limit (compact at once, keep nothing recent), not the absence of one."""
    return max(window - reserve_tokens, 0)


@dataclass(frozen=True, slots=True)
class Measure:
    """What a policy compares: the context's tokens (usage-aware), its agent-visible
    characters and messages, and the window (``None``: unknown)."""

    tokens: int
    chars: int = 0
    messages: int = 0
    window: int | None = None

    def value(self, metric: str) -> int:
        return self.chars if metric == "chars" else self.messages if metric == "messages" else self.tokens


@dataclass(frozen=True, slots=True)
class Threshold:
    """One line a policy draws: reached at ``value`` (above it when ``strict``)."""

    name: str
    metric: str  # "tokens", "chars" or "messages"
    value: int
    label: str
    origin: str  # the system the rule comes from ("adk-code")
    stop: bool = False  # the hard limit: the agent stops here
    strict: bool = False  # fires above the value (pi's ``>``), not at it
    status: str = COMPACT  # the verdict once reached

    @property
    def seed(self) -> str:  # the former name of ``origin``
        return self.origin

    @property
    def tokens(self) -> int:
        """Where it sits on a token axis (characters estimated as tokens)."""
        return estimate(self.value) if self.metric == "chars" else self.value

    def reached(self, value: int) -> bool:
        return value > self.value if self.strict else value >= self.value

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "metric": self.metric,
            "value": self.value,
            "label": self.label,
            "origin": self.origin,
            "stop": self.stop,
            "strict": self.strict,
        }


@dataclass(frozen=True, slots=True)
class Limits:
    """A policy's thresholds for one window, lowest first (the first is the reported limit);
    ``status`` is the verdict below all of them (or when there are none: ``disabled``,
    ``no_limit``, ``error``), ``reason`` says why."""

    thresholds: tuple[Threshold, ...]
    rule: str
    status: str = OK
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Verdict:
    """One policy's answer."""

    policy: str
    origin: str  # the system the policy comes from
    status: str  # ok | compact | hard_limit | warning | critical | disabled | no_limit | error
    unit: str  # tokens | chars | messages
    used: int
    limit: int | None  # the threshold compared against
    rule: str  # the comparison, in words
    percent: float | None = None  # used / context window (or / limit for messages and chars)
    hard_limit: int | None = None  # adk-code's hard stop
    reason: str = ""

    @property
    def compact(self) -> bool:
        return self.status in ACTING

    @property
    def seeds(self) -> str:  # the former name of ``origin``
        return self.origin

    def to_json(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "origin": self.origin,
            "compact": self.compact,
            "status": self.status,
            "unit": self.unit,
            "used": self.used,
            "limit": self.limit,
            "rule": self.rule,
            "percent": None if self.percent is None else round(self.percent, 2),
            "hard_limit": self.hard_limit,
            "reason": self.reason,
        }


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
        from . import extra_settings

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
        from . import all_keys

        if context_window is None:
            from ..tokens.context import ContextSettings

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
        from . import all_keys

        d: dict[str, Any] = {"context_window": self.context_window, "window_source": self.window_source}
        short = {v: k for k, v in NAMED.items()}
        for k in all_keys():
            d[short.get(k, k)] = self[k]
        return d


def _pct(used: int, of: int | None) -> float | None:
    return 100.0 * used / of if of else None


class Policy:
    """A trigger policy. Subclasses set ``name``, ``origin`` (the system its rule comes from),
    ``help``, the config ``keys``
    they read (new ones declared in ``settings`` with their defaults) and :meth:`limits`;
    then one line in the registry (:func:`ctxtool.policies.register`)."""

    name: ClassVar[str]
    origin: ClassVar[str] = ""
    help: ClassVar[str]
    keys: ClassVar[tuple[str, ...]] = ()
    settings: ClassVar[tuple[Setting, ...]] = ()

    def limits(self, window: int | None, s: PolicySettings) -> Limits:
        raise NotImplementedError

    def evaluate(self, m: Measure, s: PolicySettings) -> Verdict:
        """The verdict: the status of the highest threshold reached, else ``limits().status``."""
        lim = self.limits(m.window, s)
        origin = self.origin or getattr(self, "seeds", "")  # ``seeds``: the former name
        if not lim.thresholds:
            return Verdict(self.name, origin, lim.status, "tokens", m.tokens, None, lim.rule,
                           _pct(m.tokens, m.window), reason=lim.reason)
        primary = lim.thresholds[0]
        used = m.value(primary.metric)
        status = lim.status
        for th in lim.thresholds:
            if th.reached(m.value(th.metric)):
                status = th.status
        percent = _pct(used, m.window) if primary.metric == "tokens" and m.window else _pct(used, primary.value)
        hard = next((th.value for th in lim.thresholds if th.stop), None)
        return Verdict(self.name, origin, status, primary.metric, used, primary.value, lim.rule, percent,
                       hard_limit=hard, reason=lim.reason)
