"""The bridge from compaction to the context window and the trigger policies.

Compaction asks two questions: which context window applies, and does the policy say
compact. Both are answered by the one resolver (:mod:`ctxtool.tokens.context`) and the policy
registry (:mod:`ctxtool.policies`), as ``check``, ``stats`` and ``replay`` answer them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..errors import CtxtoolError, Failure
from ..model import Message, Transcript
from ..tokens.count import Tokenizer
from .settings import CompactOptions


def context_settings(opts: CompactOptions) -> Any:
    """The flags and config for the window (:class:`ctxtool.tokens.context.ContextSettings`);
    ``opts.context_window`` acts as ``--context-window``."""
    # lazy: start-up (loaded only when this runs: ..tokens.context)
    from ..tokens.context import ContextSettings

    cs = opts.context if opts.context is not None else ContextSettings()
    if opts.context_window and opts.context_window != cs.window:
        cs = dataclasses.replace(cs, window=opts.context_window)
    return cs


def window_info(t: Transcript, opts: CompactOptions) -> Any:
    """The window and where it came from (:class:`ctxtool.tokens.context.WindowInfo`), in the
    resolver's order: flag → config → what the transcript records → the registry entry of its
    last model → the config's model."""
    return context_settings(opts).resolve(t)


def resolve_window(t: Transcript, opts: CompactOptions) -> int | None:
    """The window (:func:`window_info`'s), None when unknown."""
    return int(window_info(t, opts).window or 0) or None


def policy_settings(opts: CompactOptions, window: int | None) -> Any:
    """Every policy's settings (the config's, as ``check`` reads them) with the options'."""
    # lazy: start-up (loaded only when this runs: ..policies.settings)
    from ..policies.settings import PolicySettings

    values = dict(opts.policy_values)
    values.update({"compaction.reserve_tokens": opts.reserve_tokens, "compaction.max_tokens": opts.max_tokens,
                   "compaction.max_messages": opts.max_messages})
    return PolicySettings(window, "flag", values)


@dataclass(frozen=True, slots=True)
class Decision:
    should: bool
    why: str  # the rule that fired, or why not
    context_tokens: int
    limit: int | None  # the token limit, when the policy has one


def decide(
    source: Transcript | list[Message], window: int | None, opts: CompactOptions, tok: Tokenizer
) -> Decision:
    """The trigger (policy ``opts.policy``; the Go agent by default: context ≥ window − reserve,
    else ≥ MaxTokens without a window) over the transcript's current context, as ``ctxtool
    check`` decides it; ``force`` skips it."""
    # lazy: start-up (loaded only when this runs: ..policies.base, ..policies.check)
    from ..policies.base import ERROR
    from ..policies.check import check_messages, check_transcript

    settings = policy_settings(opts, window)
    if isinstance(source, Transcript):
        res = check_transcript(source, settings, policy=opts.policy, tokenizer=tok, context=context_settings(opts))
    else:
        res = check_messages(source, settings, policy=opts.policy, tokenizer=tok)
    v = res.verdict
    used = res.context.tokens
    limit = v.limit if v.unit == "tokens" else None
    if opts.force:
        return Decision(True, "force", used, limit)
    if v.status == ERROR:
        raise CtxtoolError(v.reason, kind=Failure.USAGE)
    if v.compact:
        return Decision(True, f"{v.policy}: {v.rule}" + (f" ({v.used:,} vs {v.limit:,})" if v.limit is not None else ""),
                        used, limit)
    return Decision(False, v.reason or f"{v.policy}: below the limit", used, limit)
