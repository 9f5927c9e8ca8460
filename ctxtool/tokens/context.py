"""One answer to "how full is this context?": the window, the tokens, and where each came from.
``stats``, ``check``, ``replay``, ``trim`` and the agent-loop transform all ask :func:`resolve`,
so they report the same figures. The window is the first found of flag, config, transcript,
registry and agent rule, else unknown (never a made-up number); the tokens are the usage-aware
estimate over the current context (:func:`view`). The order and which usage is trusted:
docs/architecture.md, "Tokens and windows"."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING, Any, NamedTuple

from ..errors import CtxtoolError
from ..model import HINT_SUMMARY, KIND_COMPACTION_SUMMARY, Compaction, Message, Record, Transcript
from .count import USAGE, ContextEstimate, Tokenizer, context_tokens, count_messages, get_tokenizer

if TYPE_CHECKING:
    from .models import ModelInfo

SUMMARY_PREFIX = "[Previous conversation summary]"
#: a message's model (None: none named)
MODEL = attrgetter("model")
#: Claude Code's boundary line, as its reader names the record
BOUNDARY_RECORDS = ("system:compact_boundary",)


# -- the window ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WindowInfo:
    window: int | None
    source: str  # flag | file:PATH | env:NAME | transcript | registry:NAME | none
    model: str | None = None  # the model in effect (as named)
    model_source: str = "none"  # flag | transcript | config | none

    def to_json(self) -> dict[str, Any]:
        return {"window": self.window, "source": self.source, "model": self.model, "model_source": self.model_source}


#: the window a model ctxtool calls (a summarizer) is given when neither a flag nor the registry
#: knows it: a transcript's window is then unknown, but a request must still be split somewhere
CALLED_MODEL_WINDOW = 128_000


def called_model_window(window: int | None, model: str | None) -> int:
    """The window of a model ctxtool sends requests to: the flag, else the registry's entry for
    ``model`` (a name it does not know is not an error here), else :data:`CALLED_MODEL_WINDOW`."""
    if window:
        return int(window)
    info = _lookup(model)
    if info is not None and info.context_window:
        return info.context_window
    return CALLED_MODEL_WINDOW


def _lookup(name: str | None) -> ModelInfo | None:
    """:func:`ctxtool.tokens.models.lookup`; the registry is imported only when there is a name."""
    if not name:
        return None
    # lazy: start-up (`ctxtool --help` would load ctxtool.tokens.models)
    from .models import lookup

    return lookup(name)


@dataclass(frozen=True, slots=True)
class ContextSettings:
    """What the flags and the config say about the window, read once per command (plain
    values: it crosses to worker processes)."""

    window: int | None = None  # --context-window
    model: str | None = None  # --model
    config_window: int | None = None
    config_window_source: str = "none"
    config_model: str | None = None

    def __post_init__(self) -> None:
        for name in (self.model, self.config_model):
            if name:
                # lazy: start-up (`ctxtool --help` would load ctxtool.tokens.models)
                from .models import require

                require(name)  # a name the user gave: unknown is a usage error

    @classmethod
    def of(cls, settings: ContextSettings | Any = None) -> ContextSettings:
        """``settings`` as a :class:`ContextSettings`: itself, or read from a ``Config`` (default:
        the config loaded from the environment), as :func:`resolve` takes it."""
        return settings if isinstance(settings, ContextSettings) else cls.from_config(settings)

    @classmethod
    def from_config(cls, cfg: Any = None, *, window: int | None = None, model: str | None = None) -> ContextSettings:
        """``cfg`` (a :class:`ctxtool.config.Config`; default: loaded from the environment):
        values it holds as flags count as flags."""
        if cfg is None:
            # lazy: start-up (`ctxtool compactions` would load ctxtool.config)
            from ..config import Config

            cfg = Config()
        if window is None and cfg.source("compaction.context_window") == "flag":
            window = int(cfg["compaction.context_window"]) or None
        if model is None and cfg.source("model") == "flag":
            model = str(cfg["model"]) or None
        cw, src = None, "none"
        for key in ("compaction.context_window", "context_window"):
            if cfg[key] and cfg.source(key) != "flag":
                cw, src = int(cfg[key]), str(cfg.source(key))
                break
        cm = str(cfg["model"]) if cfg["model"] and cfg.source("model") != "flag" else None
        return cls(window or None, model or None, cw, src, cm)

    def resolve(self, t: Transcript | None) -> WindowInfo:
        """The window for ``t`` (``None``: no transcript, flags and config only)."""
        return WindowInfo(*self.window_for(t))

    def window_for(
        self, t: Transcript | None, msgs: Sequence[Message] | None = None
    ) -> tuple[int | None, str, str | None, str]:
        """:meth:`resolve`'s answer as a plain tuple (window, source, model, model source);
        ``msgs``: the messages of ``t``, if the caller has them (see :func:`last_model`)."""
        recorded = last_model(t, msgs) if t is not None else None
        model, msrc = (self.model, "flag") if self.model else (recorded, "transcript") if recorded else (
            (self.config_model, "config") if self.config_model else (None, "none"))
        if self.window:
            return self.window, "flag", model, msrc
        if self.model:
            info = _lookup(self.model)
            assert info is not None
            return info.context_window, f"registry:{info.name}", model, msrc
        if self.config_window:
            return self.config_window, self.config_window_source, model, msrc
        if t is not None:
            cw = t.extra.get("context_window")
            if isinstance(cw, int) and not isinstance(cw, bool) and cw > 0:
                return cw, "transcript", model, msrc
            info = _lookup(recorded)
            if info is not None and info.context_window:
                own = _agent_window(t, recorded, info.context_window) if recorded else None
                if own is not None:
                    return own[0], own[1], model, msrc
                return info.context_window, f"registry:{info.name}", model, msrc
        if self.config_model:
            info = _lookup(self.config_model)
            if info is not None and info.context_window:
                return info.context_window, f"registry:{info.name}", model, msrc
        return None, "none", model, msrc


def _agent_window(t: Transcript, model: str, registered: int) -> tuple[int, str] | None:
    """The agent's own rule for the window of a model it recorded (Claude Code's 200,000
    without the ``[1m]`` suffix): :meth:`ctxtool.formats.base.Format.agent_window`."""
    # lazy: start-up (loaded only when this runs: ..formats)
    from ..formats import get_format

    try:
        return get_format(t.format).agent_window(t, model, registered)
    except CtxtoolError:  # a format this build does not know
        return None


def last_model(t: Transcript, msgs: Sequence[Message] | None = None) -> str | None:
    """The last model the transcript records (an assistant message's, else the transcript's);
    Claude Code's ``<synthetic>`` stand-in is not a model. ``msgs``: the messages of ``t`` (in
    order), if the caller has them: the walk is skipped when none names a model (datasets)."""
    if msgs is None or any(map(MODEL, msgs)):
        for m in reversed(t.entries if msgs is None else msgs):
            if isinstance(m, Message) and m.model and m.role == "assistant" and not m.model.startswith("<"):
                return m.model
    name = t.extra.get("model")
    return name if isinstance(name, str) and name else None


def resolve_window(t: Transcript | None, settings: ContextSettings | None = None) -> WindowInfo:
    return (settings or ContextSettings()).resolve(t)


# -- the current context ------------------------------------------------------------------------


@dataclass(slots=True)
class ContextView:
    """The messages in the agent's current context, as indices into ``messages``."""

    messages: list[Message]
    indices: list[int]
    trust_from: int = 0  # usage recorded on messages before this index predates the boundary
    summary: str = ""  # a compaction entry's summary (in context, but not a message)
    boundary: str | None = None  # compaction | summary | boundary (what the last one was)

    @property
    def context_messages(self) -> list[Message]:
        return [self.messages[i] for i in self.indices]


def is_summary(m: Message) -> bool:
    """A compaction summary written as a message (Claude Code's, ctxtool's in datasets)."""
    if m.metadata.kind == KIND_COMPACTION_SUMMARY or (m.extra and m.extra.get(HINT_SUMMARY)):
        return True
    if m.role != "user" or not m.content or m.content[0].type != "text":
        return False
    return m.content[0].text.startswith(SUMMARY_PREFIX)


def view(source: Transcript | Sequence[Message]) -> ContextView:
    """The current context of a transcript (or of a plain message list): everything after the
    last compaction boundary, plus the system prompts before it."""
    entries: Sequence[Any] = source.entries if isinstance(source, Transcript) else source
    msgs: list[Message] = []
    marker: Any = None
    kind = None
    at = 0  # messages before the marker
    kept: frozenset[str] = frozenset()  # Claude Code 2.1: the messages before its boundary it kept verbatim
    visible: list[int] = []  # the agent-visible messages: the context when there is no marker
    for e in entries:
        if isinstance(e, Message):
            md = e.metadata
            # is_summary asked only of what it can be true of (a marked kind or hint, a user text)
            if (e.role == "user" or e.extra or md.kind == KIND_COMPACTION_SUMMARY) and is_summary(e) and not (
                    kind == "summary" and at == len(msgs) - 1 and msgs[-1].role == e.role):
                if not (kind == "boundary" and at == len(msgs)):  # not the summary of that boundary
                    kept = frozenset()
                marker, kind, at = e, "summary", len(msgs)
            if md.agent_visible is not False:  # Message.agent_visible, read in place
                visible.append(len(msgs))
            msgs.append(e)
        elif isinstance(e, Compaction):
            marker, kind, at, kept = e, "compaction", len(msgs), frozenset()
        elif isinstance(e, Record) and e.kind in BOUNDARY_RECORDS:
            # lazy: start-up (`ctxtool --help` would load ctxtool.formats.anthropic_blocks)
            from ..formats.claude_code_lines import boundary_info

            marker, kind, at = e, "boundary", len(msgs)
            kept = frozenset(boundary_info(e.line.obj).preserved)
    if marker is None:
        return ContextView(msgs, visible)
    start, trust, summary = at, at, ""
    if isinstance(marker, Compaction):
        summary, target = read_compaction(source, marker, msgs)
        kept_after = False
        if isinstance(target, Message):
            start = next((i for i, m in enumerate(msgs) if m is target), at)
            kept_after = start >= at
        if kept_after or marker.details.get("kept_after"):
            trust = len(msgs)  # kept messages written after the entry: their usage predates it
    elif kind == "summary" and (marker.metadata.extra.get("first_kept_id") is not None or not marker.metadata.kind):
        # a summary ctxtool wrote (it names the first kept message, or only its prefix marks
        # it): the messages after it were kept from before the compaction
        trust = len(msgs)
    idx = [i for i in range(start) if (msgs[i].role == "system" or (kept and _named(msgs[i], kept))) and msgs[i].agent_visible]
    idx += [i for i in range(start, len(msgs)) if msgs[i].agent_visible]
    return ContextView(msgs, idx, trust, summary, kind)


def _named(m: Message, ids: frozenset[str]) -> bool:
    """Whether ``m`` is one of ``ids``: its id, or the uuid of one of its lines."""
    if m.id in ids:
        return True
    return any(isinstance(ln.obj, dict) and ln.obj.get("uuid") in ids for ln in m.lines)


def read_compaction(source: Any, c: Compaction, msgs: list[Message]) -> tuple[str, Message | None]:
    """What a compaction entry shows the agent and the first message it kept: the format's
    own answer (:meth:`ctxtool.formats.base.Format.read_compaction`) for a transcript."""
    if isinstance(source, Transcript):
        # lazy: start-up (loaded only when this runs: ..formats)
        from ..formats import get_format

        try:
            return get_format(source.format).read_compaction(source, c)
        except CtxtoolError:  # a format this build does not know: the generic answer
            pass
    kept = next((m for m in msgs if m.id == c.first_kept_id), None) if c.first_kept_id else None
    return c.summary, kept


def estimate(v: ContextView, tok: Tokenizer | None = None, counts: Sequence[int] | None = None) -> ContextEstimate:
    """The usage-aware estimate of a view (``counts``: every message's tokens, if known)."""
    return ContextEstimate(*_estimate(v, tok or get_tokenizer("heuristic"), counts))


def _estimate(v: ContextView, tok: Tokenizer, counts: Sequence[int] | None,
              any_usage: bool | None = None) -> tuple[int, int, int, str]:
    """:func:`estimate`'s figures as a plain tuple (see :func:`ctxtool.tokens.count.context_tokens`)."""
    if counts is None:
        sub = count_messages(v.context_messages, tok)
        full = [0] * len(v.messages)
        for i, n in zip(v.indices, sub, strict=True):
            full[i] = n
        counts = full
    extra = tok.count(v.summary) if v.summary else 0
    return context_tokens(v.messages, tok, counts, v.indices, v.trust_from, extra, any_usage)


# -- one answer ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ContextInfo:
    """The window and the context tokens of one transcript, with their sources."""

    window: int | None
    window_source: str
    model: str | None
    model_source: str
    tokens: int
    tokens_source: str  # usage | estimate
    usage_tokens: int
    trailing_tokens: int
    messages: int  # agent-visible messages in the current context
    chars: int  # their characters (AgentCore.Context's metric; images at a fixed estimate)
    boundary: str | None = None  # the last compaction boundary, if any
    tokenizer: str = "heuristic"
    extra: dict[str, Any] = field(default_factory=dict)
    estimator: str = ""  # which estimate gave ``tokens``, in plain words (see :func:`resolve`)

    @property
    def percent(self) -> float | None:
        return round(100.0 * self.tokens / self.window, 2) if self.window else None

    @property
    def estimate(self) -> ContextEstimate:
        return ContextEstimate(self.tokens, self.usage_tokens, self.trailing_tokens, self.tokens_source)

    def to_json(self) -> dict[str, Any]:
        return {
            "window": self.window,
            "window_source": self.window_source,
            "model": self.model,
            "model_source": self.model_source,
            "tokens": self.tokens,
            "source": self.tokens_source,
            "usage_tokens": self.usage_tokens,
            "trailing_tokens": self.trailing_tokens,
            "percent": self.percent,
            "messages": self.messages,
            "chars": self.chars,
            "boundary": self.boundary,
            "tokenizer": self.tokenizer,
            "estimator": self.estimator,
        }


def _records_usage(t: Transcript | Sequence[Message], msgs: Sequence[Message]) -> bool:
    """Whether transcript ``t`` (its messages: ``msgs``) records any usage."""
    return isinstance(t, Transcript) and any(u.total > 0 for u in filter(None, map(USAGE, msgs)))  # a Usage is always true


def _estimator(source: str, trailing_tokens: int, tok: Tokenizer, records: bool = False) -> str:
    """Which estimate gave a context's tokens (its source, the tokens after the last usage), in plain words."""
    if source == "usage":
        return (f"last recorded usage + {tok.name} count of what follows" if trailing_tokens
                else "last recorded usage, nothing after it")
    cal = getattr(tok, "calibration", None)
    if cal is None:
        why = "no usage recorded since the last compaction" if records else "no recorded usage"
        return f"{tok.name} count of the context ({why})"
    where = (f"fitted to the {cal.trained_on:,} turns this file records" if cal.source == "file"
             else f"{cal.source.split(':', 1)[-1]} family's ratios")
    why = "; no usage recorded since the last compaction" if records else ""
    return f"calibrated estimate, {where} (overhead {round(cal.overhead):,} + content){why}"


def resolve(
    t: Transcript | Sequence[Message],
    *,
    window: int | None = None,
    model: str | None = None,
    settings: ContextSettings | Any = None,
    tokenizer: Tokenizer | str | None = None,
    counts: Sequence[int] | None = None,
    chars: Sequence[int] | None = None,
) -> ContextInfo:
    """The one context resolver: window (flag → config → transcript → registry → unknown)
    and usage-aware tokens after the last compaction boundary.

    ``settings`` is a :class:`ContextSettings` or a ``Config`` (default: the config loaded
    from the environment); ``window``/``model`` act as the flags. ``counts`` and ``chars`` are
    the tokens and characters of every message of ``t`` when the caller has them already."""
    tok = get_tokenizer(tokenizer) if tokenizer is None or isinstance(tokenizer, str) else tokenizer
    cs = ContextSettings.of(settings)
    if window or model:
        cs = ContextSettings(window or cs.window, model or cs.model, cs.config_window, cs.config_window_source,
                             cs.config_model)
    f = context_figures(t, cs, tok, counts, chars)
    # The default where the file records usage: the last usage plus the count of what follows
    # it (ctxtool.calibration measures it: within ±10% on 99% of the corpus's turns). Where none
    # was recorded since the last compaction it is the tokenizer's count alone, which misses
    # what the file does not hold (system prompt, tool schemas); --tokenizer calibrated adds
    # the overhead fitted to the file. ContextInfo.estimator says which estimate was used.
    records = f.tokens_source == "estimate" and f.records_usage and _records_usage(t, f.view.messages)
    return ContextInfo(
        f.window, f.window_source, f.model, f.model_source, f.tokens, f.tokens_source, f.usage_tokens, f.trailing_tokens,
        len(f.view.indices), f.chars, f.view.boundary, tok.name,
        estimator=_estimator(f.tokens_source, f.trailing_tokens, tok, records),
    )


class ContextFigures(NamedTuple):
    """:func:`context_figures`' answer: the fields of :class:`WindowInfo` and of
    :class:`ContextInfo` that :func:`resolve` computes, a plain tuple with names."""

    window: int | None
    window_source: str
    model: str | None  # the model in effect
    model_source: str
    tokens: int
    tokens_source: str
    usage_tokens: int
    trailing_tokens: int
    view: ContextView
    chars: int  # the context's characters
    records_usage: bool  # whether any message records usage


def context_figures(
    t: Transcript | Sequence[Message],
    cs: ContextSettings,
    tok: Tokenizer,
    counts: Sequence[int] | None = None,
    chars: Sequence[int] | None = None,
    v: ContextView | None = None,
) -> ContextFigures:
    """:func:`resolve`'s figures as a plain tuple (settings and tokenizer given as objects), for
    a caller that puts them in a result of its own (``stats``: one per transcript; ``v``: the
    :func:`view` of ``t``, if the caller made it, e.g. for its messages)."""
    if v is None:
        v = view(t)
    win, win_source, in_effect, in_effect_source = cs.window_for(t if isinstance(t, Transcript) else None, v.messages)
    recorded = any(map(USAGE, v.messages))  # a Usage is always true
    tokens, usage_tokens, trailing_tokens, source = _estimate(v, tok, counts, recorded)
    if chars is None:
        n_chars = sum(v.messages[i].chars() for i in v.indices)
    else:  # every message in the context (the usual case): all of them, summed at once
        n_chars = sum(chars) if len(v.indices) == len(chars) else sum(chars[i] for i in v.indices)
    n_chars += len(v.summary)
    return ContextFigures(win, win_source, in_effect, in_effect_source, tokens, source, usage_tokens, trailing_tokens,
                          v, n_chars, recorded)
