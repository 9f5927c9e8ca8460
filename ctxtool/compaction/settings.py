"""Compaction settings: one dataclass, its defaults taken once from the settings table.

The defaults live in :data:`ctxtool.config.SETTINGS`; :class:`CompactOptions` reads
its defaults from there, and the CLI builds its options with :meth:`CompactOptions.from_config`,
so a default is stated in one place only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..config import BY_KEY
from ..summarizers import prompt as sp

if TYPE_CHECKING:
    from ..config import Config


def _default(key: str) -> Any:
    """The default of a setting of the table (``compaction.keep_recent_tokens`` ...)."""
    return field(default=BY_KEY[key].default)


#: CompactOptions field -> its key in the settings table
CONFIG_KEYS = {
    "layout": "compaction.layout",
    "keep_recent_tokens": "compaction.keep_recent_tokens",
    "keep_recent": "compaction.keep_recent",
    "retain_last_turns": "compaction.retain_last_turns",
    "keep_last_messages": "compaction.keep_last_messages",
    "reserve_tokens": "compaction.reserve_tokens",
    "max_tokens": "compaction.max_tokens",
    "max_messages": "compaction.max_messages",
    "tool_call_cutoff": "compaction.tool_call_cutoff",
    "summary_max_tokens": "summarizer.max_tokens",
}


@dataclass(slots=True)
class CompactOptions:
    layout: str = _default("compaction.layout")  # a registered layout (compaction.layouts)
    keep_recent_tokens: int = _default("compaction.keep_recent_tokens")
    keep_recent: int = _default("compaction.keep_recent")  # the Go agent's KeepRecent, when keep_recent_tokens is 0
    retain_last_turns: int = _default("compaction.retain_last_turns")
    keep_last_messages: int = _default("compaction.keep_last_messages")
    force: bool = False
    tokenizer: str = "heuristic"  # a tokenizer name (ctxtool.tokens.count.get_tokenizer)
    context_window: int | None = None
    reserve_tokens: int = _default("compaction.reserve_tokens")
    max_tokens: int = _default("compaction.max_tokens")  # the Go agent's MaxTokens: the limit when no window is known
    max_messages: int = _default("compaction.max_messages")  # the Go agent's MaxMessages: the last fallback
    policy: str = "effective-limit"  # the trigger policy (ctxtool.policies.POLICIES)
    style: str | None = None  # structured | retain (default: the layout's)
    summary_directives: Sequence[str] = ()
    retain_directives: Sequence[str] = ()
    instructions: str | None = None
    pins: Sequence[str] = ()  # pinned instructions, kept verbatim beside the summary (compaction.pins)
    tool_digest: bool = False
    tool_call_cutoff: int = _default("compaction.tool_call_cutoff")
    fallback: bool = False
    min_retention: float | None = None  # reject a summary whose retention (ctxtool.score) is below this
    max_false_claims: int | None = None  # reject a model summary with more claims the records contradict
    tool_clip: int = sp.TOOL_RESULT_CLIP
    summary_max_tokens: int = _default("summarizer.max_tokens")
    summary_budget: int = sp.SUMMARY_BUDGET  # tokens the heuristic summary fits; the size a model is asked for
    context: Any = None  # ctxtool.tokens.context.ContextSettings: the flags and config for the window
    policy_values: dict[str, Any] = field(default_factory=dict)  # the trigger policies' settings (config keys)

    @classmethod
    def from_config(cls, cfg: Config, **overrides: Any) -> CompactOptions:
        """Options from resolved settings (defaults → file → env → flags), then ``overrides``."""
        kw: dict[str, Any] = {}
        for name, key in CONFIG_KEYS.items():
            s = BY_KEY[key]
            kw[name] = s.type(cfg[key])
        # lazy: start-up (`ctxtool compact` would load ctxtool.tokens.context)
        from ..policies import all_keys
        from ..tokens.context import ContextSettings

        kw["context"] = ContextSettings.from_config(cfg)
        kw["policy_values"] = {k: cfg[k] for k in all_keys()}
        kw.update(overrides)
        return cls(**kw)

    def summary_style(self) -> str:
        if self.style:
            return self.style
        # lazy: start-up (loaded only when this runs: .layouts)
        from .layouts import LAYOUTS

        return LAYOUTS.get(self.layout).style

    def to_json(self) -> dict[str, Any]:
        return {
            "layout": self.layout,
            "keep_recent_tokens": self.keep_recent_tokens,
            "retain_last_turns": self.retain_last_turns,
            "keep_last_messages": self.keep_last_messages,
            "force": self.force,
            "tokenizer": self.tokenizer,
            "context_window": self.context_window,
            "reserve_tokens": self.reserve_tokens,
            "style": self.summary_style(),
            "tool_digest": self.tool_digest,
            "fallback": self.fallback,
            "min_retention": self.min_retention,
        }


def summarizer_from_config(config: Any, *, model: str | None = None, cache: bool = True,
                           max_in_flight: int | None = None, engine: Any = None) -> Any:
    """The summary model the settings name (``summarizer.*`` of ``config``, a
    :class:`ctxtool.config.Config`); ``model``: the agent's, used when ``summarizer.model`` is
    empty. A remote one is wrapped: ``max_in_flight`` bounds its requests through ``engine``'s
    limiter (shared by every worker of the engine; None: this process's threads), then
    ``cache`` keeps its summaries in the summary cache (``cache_dir``, else the user's)."""
    # lazy: start-up (`ctxtool compact` would load ctxtool.summarizers.remote)
    from ..summarizers import get_summarizer

    kind = str(config["summarizer.kind"])
    if kind == "heuristic":
        return get_summarizer("heuristic")
    inner = get_summarizer(
        kind,
        model=config["summarizer.model"] or model or None,
        base_url=config["summarizer.base_url"] or None,
        timeout=float(config["summarizer.timeout"]),
        retries=int(config["summarizer.retries"]),
        context_window=int(config["summarizer.context_window"]) or None,
        max_tokens=int(config["summarizer.max_tokens"]),
        command=config["summarizer.command"] or None,
    )
    if max_in_flight:  # inside the cache: a hit never waits for a slot
        # lazy: start-up (`ctxtool --help` would load ctxtool.run.engines.limit)
        from ..run.engines.base import ThreadLimiter
        from ..run.engines.limit import LimitedSummarizer

        limiter = engine.limiter(max_in_flight) if engine is not None else ThreadLimiter(max_in_flight)
        inner = LimitedSummarizer(inner, limiter)
    if not cache:
        return inner
    # lazy: start-up (`ctxtool compact` would load ctxtool.cache, ctxtool.io.paths)
    from ..io.paths import cache_dir
    from ..summarizers.cache import CachedSummarizer

    return CachedSummarizer(inner, config["cache_dir"] or cache_dir())
