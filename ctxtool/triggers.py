"""Should this transcript be compacted now? Every seed's trigger, over one transcript.

Policies (``POLICIES``):

``seed000``  seed 000 ``ShouldCompact``: when auto-compaction is on, compact once the
             estimated context reaches the effective token limit (context window minus
             reserve; else ``MaxTokens``); with neither, once the message count reaches
             ``MaxMessages``.
``reserve``  seeds 000/003: ``context_tokens > context_window - reserve_tokens``; no known
             window means compaction is disabled (seed 003).
``ratio``    seed 001: ``tokens >= context_limit * threshold_ratio``; a missing context
             limit is an error (seed 001's strict rule).
``seed004``  seed 004: compact at >= 70% of the window, hard stop at >= 95%.

Used tokens are the usage-aware estimate (last provider usage plus what came after it,
else the heuristic over visible messages), as ``ctxtool stats`` reports them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import CtxtoolError, ExitCode
from .model import Message, Transcript
from .tokens import ContextEstimate, Tokenizer, estimate_context, get_tokenizer

POLICIES = ("seed000", "reserve", "ratio", "seed004")
DEFAULT_POLICY = "seed000"

OK = "ok"
COMPACT = "compact"
HARD_LIMIT = "hard_limit"  # seed 004: the agent stops
DISABLED = "disabled"
NO_LIMIT = "no_limit"  # no threshold can be computed (seed 003 without a window)
ERROR = "error"  # seed 001 strict: no context limit


@dataclass(frozen=True, slots=True)
class TriggerSettings:
    """The settings every policy reads; :meth:`from_config` takes them from a ``Config``."""

    context_window: int | None = None
    window_source: str = "none"
    reserve_tokens: int = 16384
    max_tokens: int = 8000
    max_messages: int = 50
    threshold_ratio: float = 0.8
    compact_threshold: float = 0.70
    hard_limit: float = 0.95
    enabled: bool = True
    auto_compact: bool = True

    @classmethod
    def from_config(cls, cfg: Any) -> TriggerSettings:
        window, source = cfg.context_window()
        return cls(
            context_window=window,
            window_source=source,
            reserve_tokens=int(cfg["compaction.reserve_tokens"]),
            max_tokens=int(cfg["compaction.max_tokens"]),
            max_messages=int(cfg["compaction.max_messages"]),
            threshold_ratio=float(cfg["compaction.threshold_ratio"]),
            compact_threshold=float(cfg["compaction.compact_threshold"]),
            hard_limit=float(cfg["compaction.hard_limit"]),
            enabled=bool(cfg["compaction.enabled"]),
            auto_compact=bool(cfg["compaction.auto_compact"]),
        )

    def effective_limit(self) -> tuple[int | None, str]:
        """Seed 000 ``EffectiveTokenLimit``: window minus reserve, else ``MaxTokens``, else none."""
        if self.context_window and self.context_window > 0:
            return max(self.context_window - self.reserve_tokens, 0), "context_window - reserve_tokens"
        if self.max_tokens and self.max_tokens > 0:
            return self.max_tokens, "max_tokens"
        return None, "none"

    def to_json(self) -> dict[str, Any]:
        return {
            "context_window": self.context_window,
            "window_source": self.window_source,
            "reserve_tokens": self.reserve_tokens,
            "max_tokens": self.max_tokens,
            "max_messages": self.max_messages,
            "threshold_ratio": self.threshold_ratio,
            "compact_threshold": self.compact_threshold,
            "hard_limit": self.hard_limit,
            "enabled": self.enabled,
            "auto_compact": self.auto_compact,
        }


@dataclass(frozen=True, slots=True)
class Verdict:
    """One policy's answer."""

    policy: str
    seeds: str
    status: str  # ok | compact | hard_limit | disabled | no_limit | error
    unit: str  # tokens | messages
    used: int
    limit: int | None  # the threshold compared against
    rule: str  # the comparison, in words
    percent: float | None = None  # used / context window (or / limit for messages)
    hard_limit: int | None = None  # seed 004
    reason: str = ""

    @property
    def compact(self) -> bool:
        return self.status in (COMPACT, HARD_LIMIT)

    def to_json(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "seeds": self.seeds,
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


@dataclass(slots=True)
class CheckResult:
    """The verdicts of every policy for one transcript; ``policy`` names the one that decides."""

    transcript: str
    path: str
    index: int
    id: str | None
    messages: int
    context: ContextEstimate
    settings: TriggerSettings
    policy: str
    verdicts: list[Verdict] = field(default_factory=list)
    tokenizer: str = "heuristic"

    @property
    def verdict(self) -> Verdict:
        return next(v for v in self.verdicts if v.policy == self.policy)

    @property
    def compact(self) -> bool:
        return self.verdict.compact

    def to_json(self) -> dict[str, Any]:
        v = self.verdict
        return {
            "transcript": self.transcript,
            "path": self.path,
            "index": self.index,
            "id": self.id,
            "messages": self.messages,
            "used_tokens": self.context.tokens,
            "context": self.context.to_json(),
            "context_window": self.settings.context_window,
            "window_source": self.settings.window_source,
            "tokenizer": self.tokenizer,
            "policy": self.policy,
            "compact": v.compact,
            "status": v.status,
            "limit": v.limit,
            "percent": None if v.percent is None else round(v.percent, 2),
            "verdicts": {x.policy: x.to_json() for x in self.verdicts},
        }


def _pct(used: int, of: int | None) -> float | None:
    return 100.0 * used / of if of else None


def policy_seed000(used: int, messages: int, s: TriggerSettings) -> Verdict:
    seeds = "000"
    window = s.context_window
    if not s.enabled or not s.auto_compact:
        return Verdict("seed000", seeds, DISABLED, "tokens", used, None, "AutoCompact off", _pct(used, window),
                       reason="compaction.auto_compact or compaction.enabled is false")
    limit, how = s.effective_limit()
    if limit is not None:
        status = COMPACT if used >= limit else OK
        return Verdict("seed000", seeds, status, "tokens", used, limit, "tokens >= window - reserve" if how != "max_tokens" else "tokens >= max_tokens",
                       _pct(used, window) if window else _pct(used, limit))
    status = COMPACT if s.max_messages > 0 and messages >= s.max_messages else OK
    return Verdict("seed000", seeds, status, "messages", messages, s.max_messages or None,
                   "messages >= max_messages", _pct(messages, s.max_messages or None),
                   reason="no token limit: fell back to MaxMessages")


def policy_reserve(used: int, s: TriggerSettings) -> Verdict:
    seeds = "000,003"
    window = s.context_window
    if not s.enabled:
        return Verdict("reserve", seeds, DISABLED, "tokens", used, None, "tokens > window - reserve", _pct(used, window),
                       reason="compaction.enabled is false")
    if not window:
        return Verdict("reserve", seeds, NO_LIMIT, "tokens", used, None, "tokens > window - reserve",
                       reason="no context window known: compaction disabled (seed 003)")
    limit = window - s.reserve_tokens
    status = COMPACT if used > limit else OK
    return Verdict("reserve", seeds, status, "tokens", used, limit, "tokens > window - reserve",
                   _pct(used, window))


def policy_ratio(used: int, s: TriggerSettings) -> Verdict:
    seeds = "001"
    window = s.context_window
    rule = f"tokens >= {s.threshold_ratio:g} x window"
    if not window:
        return Verdict("ratio", seeds, ERROR, "tokens", used, None, rule,
                       reason="no context limit known (seed 001 is strict): give --context-window or --model, "
                       "or set context_window in ctxtool.toml")
    if not s.enabled or not s.auto_compact:
        return Verdict("ratio", seeds, DISABLED, "tokens", used, None, rule, _pct(used, window),
                       reason="compaction.enabled or compaction.auto_compact is false")
    limit = int(window * s.threshold_ratio)
    threshold = window * s.threshold_ratio
    status = COMPACT if used >= threshold else OK
    return Verdict("ratio", seeds, status, "tokens", used, limit, rule, _pct(used, window))


def policy_seed004(used: int, s: TriggerSettings) -> Verdict:
    seeds = "004"
    window = s.context_window
    rule = f"tokens >= {s.compact_threshold:.0%} (stop >= {s.hard_limit:.0%})"
    if not window:
        return Verdict("seed004", seeds, NO_LIMIT, "tokens", used, None, rule,
                       reason="no context window known")
    limit = int(window * s.compact_threshold)
    hard = int(window * s.hard_limit)
    pct = _pct(used, window)
    if used >= window * s.hard_limit:
        status = HARD_LIMIT
    elif used >= window * s.compact_threshold:
        status = COMPACT if s.enabled else DISABLED
    else:
        status = OK
    return Verdict("seed004", seeds, status, "tokens", used, limit, rule, pct, hard_limit=hard)


def check_messages(
    msgs: Sequence[Message],
    settings: TriggerSettings | None = None,
    *,
    policy: str = DEFAULT_POLICY,
    tokenizer: Tokenizer | None = None,
    label: str = "-",
    path: str = "-",
    index: int = 0,
    id: str | None = None,
) -> CheckResult:
    """Every policy's verdict for a message list; ``policy`` decides (and must be computable:
    ``ratio`` without a context window raises seed 001's strict error)."""
    if policy not in POLICIES:
        raise CtxtoolError(f"unknown policy {policy!r}; choose one of: {', '.join(POLICIES)}", code=ExitCode.USAGE)
    s = settings or TriggerSettings()
    tok = tokenizer or get_tokenizer("heuristic")
    est = estimate_context(msgs, tok)
    used = est.tokens
    n = sum(1 for m in msgs if m.agent_visible)
    verdicts = [
        policy_seed000(used, n, s),
        policy_reserve(used, s),
        policy_ratio(used, s),
        policy_seed004(used, s),
    ]
    res = CheckResult(label, path, index, id, len(msgs), est, s, policy, verdicts, tok.name)
    v = res.verdict
    if v.status == ERROR:
        raise CtxtoolError(v.reason, code=ExitCode.USAGE, path=path if path != "-" else None)
    return res


def check_transcript(
    t: Transcript,
    settings: TriggerSettings | None = None,
    *,
    policy: str = DEFAULT_POLICY,
    tokenizer: Tokenizer | None = None,
) -> CheckResult:
    """:func:`check_messages` over a transcript."""
    return check_messages(
        t.messages, settings, policy=policy, tokenizer=tokenizer, label=t.label, path=t.path, index=t.index, id=t.id
    )
