"""What a trigger policy is: its thresholds over a measured context, and one verdict rule.

A policy says, for a context window and its settings, which thresholds apply
(:meth:`Policy.limits`); the verdict (:meth:`Policy.evaluate`), the turns at which
``replay`` sees it fire and the level ``stats`` shows all come from those thresholds, so
``check``, ``compact``, ``replay``, ``stats`` and the transform cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ..config import Setting
from ..tokens.heuristic import estimate

if TYPE_CHECKING:
    from ..tokens.context import ContextInfo
    from .settings import PolicySettings

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

    @classmethod
    def of(cls, info: ContextInfo) -> Measure:
        """What the policies compare for a resolved context (:class:`ctxtool.tokens.context.ContextInfo`)."""
        return cls(info.tokens, info.chars, info.messages, info.window)

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
        origin = self.origin
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
