"""``ctxtool check``: every registered policy's verdict on one transcript's current context."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import CtxtoolError, Failure
from ..model import Message, Transcript, transcript_json
from ..tokens.context import ContextInfo, ContextSettings, resolve
from ..tokens.count import Tokenizer, for_transcript, get_tokenizer
from . import DEFAULT, POLICIES, evaluate
from .base import ERROR, Measure, Verdict
from .settings import PolicySettings


@dataclass(slots=True)
class CheckResult:
    """The verdicts of every policy for one transcript; ``policy`` names the one that decides."""

    transcript: str
    path: str
    index: int
    id: str | None
    messages: int
    context: ContextInfo
    settings: PolicySettings
    policy: str
    verdicts: list[Verdict] = field(default_factory=list)
    tokenizer: str = "heuristic"
    error: Any = None  # ctxtool.calibration.accuracy.ErrorBar: the context estimate's uncertainty
    could_flip: list[str] = field(default_factory=list)  # policies whose verdict differs within it

    @property
    def verdict(self) -> Verdict:
        return next(v for v in self.verdicts if v.policy == self.policy)

    @property
    def compact(self) -> bool:
        return self.verdict.compact

    def to_json(self) -> dict[str, Any]:
        v = self.verdict
        return {
            **transcript_json(self),
            "messages": self.messages,
            "used_tokens": self.context.tokens,
            "context": self.context.to_json(),
            "context_window": self.context.window,
            "window_source": self.context.window_source,
            "model": self.context.model,
            "tokenizer": self.tokenizer,
            "policy": self.policy,
            "compact": v.compact,
            "status": v.status,
            "limit": v.limit,
            "percent": None if v.percent is None else round(v.percent, 2),
            "verdicts": {x.policy: x.to_json() for x in self.verdicts},
            "estimate_error": self.error.to_json() if self.error is not None else None,
            "could_flip": self.could_flip,
        }


def _check(
    source: Transcript | Sequence[Message],
    settings: PolicySettings | None,
    context: ContextSettings | Any,
    policy: str,
    tokenizer: Tokenizer | None,
    where: tuple[str, str, int, str | None],
) -> CheckResult:
    policy = POLICIES.get(policy).name  # an unknown name is a usage error; a former name, the new one
    s = settings or PolicySettings()
    tok = tokenizer or get_tokenizer("heuristic")
    if isinstance(source, Transcript):
        tok = for_transcript(tok, source)  # a calibrated estimate fitted to the transcript's own usage
    if s.context_window:  # a window given with the settings acts as the flag
        context = ContextSettings(window=s.context_window)
    elif context is None:
        context = ContextSettings()
    info = resolve(source, settings=context, tokenizer=tok)
    if info.window != s.context_window:
        s = s.with_window(info.window, info.window_source)
    label, path, index, id_ = where
    n = len(source.messages) if isinstance(source, Transcript) else len(source)
    res = CheckResult(label, path, index, id_, n, info, s, policy, evaluate(Measure.of(info), s), tok.name)
    res.error, res.could_flip = _uncertainty(source, tok, info, s)
    v = res.verdict
    if v.status == ERROR:
        raise CtxtoolError(v.reason, kind=Failure.USAGE, path=path if path != "-" else None)
    return res


def _uncertainty(source: Transcript | Sequence[Message], tok: Tokenizer, info: ContextInfo,
                 s: PolicySettings) -> tuple[Any, list[str]]:
    """The estimate's error bar and the policies whose verdict could flip within it."""
    from dataclasses import replace

    # lazy: start-up (loaded only when this runs: ..calibration.accuracy)
    from ..calibration.accuracy import context_error, flips

    bar = context_error(source if isinstance(source, Transcript) else None, tok, info.tokens, info.tokens_source,
                        info.model, trailing=info.trailing_tokens)

    def at(tokens: int) -> list[tuple[str, str]]:
        return [(v.policy, v.status) for v in evaluate(Measure.of(replace(info, tokens=tokens)), s)]

    return bar, flips(bar, at)


def check_transcript(
    t: Transcript,
    settings: PolicySettings | None = None,
    *,
    policy: str = DEFAULT,
    tokenizer: Tokenizer | None = None,
    context: ContextSettings | Any = None,
) -> CheckResult:
    """Every policy's verdict on ``t``'s current context (:func:`ctxtool.tokens.context.resolve`:
    the window from ``settings.context_window``, else ``context`` — a
    :class:`~ctxtool.tokens.context.ContextSettings` or a ``Config`` — then the transcript);
    ``policy`` decides, and must be computable (``ratio`` without a window raises its strict
    error)."""
    return _check(t, settings, context, policy, tokenizer, (t.label, t.path, t.index, t.id))


def check_messages(
    msgs: Sequence[Message],
    settings: PolicySettings | None = None,
    *,
    policy: str = DEFAULT,
    tokenizer: Tokenizer | None = None,
    label: str = "-",
    path: str = "-",
    index: int = 0,
    id: str | None = None,
) -> CheckResult:
    """:func:`check_transcript` for a plain message list (the window comes from ``settings``)."""
    return _check(msgs, settings, ContextSettings(), policy, tokenizer, (label, path, index, id))


# -- over files ------------------------------------------------------------------------------


def check_settings(config: Any = None) -> tuple[PolicySettings, ContextSettings]:
    """What ``ctxtool check`` decides by, from ``config`` (a :class:`ctxtool.config.Config`;
    None: the user's settings): the policy settings with the window known before any
    transcript is read (flags, config; else each transcript's), and the context settings
    that resolve each transcript's window."""
    if config is None:
        # lazy: start-up (the CLI passes its Config)
        from ..config import Config

        config = Config()
    cs = ContextSettings.from_config(config)
    w = cs.resolve(None)
    return PolicySettings.from_config(config, context_window=w.window, window_source=w.source), cs


def check_files(
    paths: Sequence[str],
    sink: Callable[[CheckResult], None],
    *,
    config: Any = None,
    policy: str = DEFAULT,
    tokenizer: Tokenizer | None = None,
    fmt: str | None = None,
    on_error: str = "fail",
    jobs: int | None = None,
) -> list[str]:
    """``ctxtool check``: every transcript of ``paths`` checked (:func:`check_transcript`, with
    :func:`check_settings` of ``config``), each result passed to ``sink`` in input order as it
    is known; returns the records and files ``on_error="skip"`` left out."""
    # lazy: start-up (`ctxtool check` would load ctxtool.formats.walk, ctxtool.run.manyfiles)
    from ..formats.walk import iter_paths
    from ..run.manyfiles import each_result

    settings, context = check_settings(config)
    one = functools.partial(check_transcript, settings=settings.with_window(None, "none"), policy=policy,
                            tokenizer=tokenizer, context=context)
    return each_result(one, iter_paths(paths), sink, fmt=fmt, on_error=on_error, jobs=jobs)
