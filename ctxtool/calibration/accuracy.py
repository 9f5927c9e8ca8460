"""Each estimate against the recorded input of a transcript's usage turns, the calibrated
tokenizer fitted to it, and the error bars of a context estimate."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..model import Message, Transcript
from .families import GENERIC, family_calibration, pick, shipped_ratios
from .features import (
    TurnSample,
    _text_features,
    context_rows,
    continues,
    message_features,
    redacted_share,
    turn_samples,
)
from .fit import DEFAULT_SPLIT, WITHIN, Calibration, ErrorStats, fit, split


@dataclass(slots=True)
class Accuracy:
    """Each tokenizer's error against the recorded input of every usage turn, and the
    calibrated estimate's error on the turns held back from its fit."""

    turns: int  # turns that record input tokens
    split: str
    tokenizers: dict[str, ErrorStats] = field(default_factory=dict)  # the estimate from the file alone
    offset: dict[str, ErrorStats] = field(default_factory=dict)  # plus the first turn's gap (turns 2 on)
    anchored: dict[str, ErrorStats] = field(default_factory=dict)  # the previous turn's usage + what came since
    calibrated: ErrorStats | None = None  # held-back turns only
    calibration: Calibration | None = None  # fitted on every usage turn: what the file's estimate uses
    family: Calibration | None = None
    family_error: ErrorStats | None = None  # the family's shipped ratios on every usage turn
    #: the default estimate (:func:`usage_aware`, heuristic counts) on every usage turn: nothing is fitted
    default: ErrorStats | None = None
    redacted: float = 0.0  # the share of the file's texts that are redaction markers

    def to_json(self) -> dict[str, Any]:
        return {
            "turns": self.turns,
            "target": WITHIN,
            "split": self.split,
            "tokenizers": {k: {**v.to_json(), "offset": self.offset[k].to_json() if k in self.offset else None,
                               "anchored": self.anchored[k].to_json() if k in self.anchored else None}
                           for k, v in self.tokenizers.items()},
            "calibrated": self.calibrated.to_json() if self.calibrated else None,
            "default": self.default.to_json() if self.default else None,
            "calibrated_usage_aware": self.anchored["calibrated"].to_json() if "calibrated" in self.anchored else None,
            "redacted": self.redacted,
            "calibration": self.calibration.to_json() if self.calibration else None,
            "family": {**self.family.to_json(), "measured": self.family_error.to_json() if self.family_error else None}
            if self.family else None,
        }

    def lines(self) -> list[str]:
        """One short line per estimate, for people."""
        out = [f"{name} (the file alone): {s.line}" for name, s in self.tokenizers.items()]
        if self.calibrated is not None:
            out.append(f"calibrated ({self.split} split, held-back turns): {self.calibrated.line}")
        if "calibrated" in self.anchored:
            out.append(f"calibrated, usage-aware ({self.split} split, held-back turns): {self.anchored['calibrated'].line}")
        if self.default is not None:
            out.append(f"default (last recorded usage + heuristic count of what follows; the heuristic alone after a "
                       f"compaction): {self.default.line}")
        if self.redacted > 0.5:
            out.append(f"{self.redacted:.0%} of the texts are redaction markers: the calibration counts the length "
                       "each says it replaced, as prose")
        return out

    @property
    def summary(self) -> str:
        """One line: the default and calibrated estimates' held-back error beside the tokenizers'."""
        parts = [f"{k} {v.median:.0%}" for k, v in self.tokenizers.items() if v.median is not None]
        for name, s, which in (("calibrated", self.calibrated, " held-back"), ("default (usage-aware)", self.default, "")):
            if s is not None and s.median is not None and s.within is not None:
                parts.append(f"{name} {s.median:.1%} ({s.within:.0%} of {s.turns}{which} turns within ±10%)")
        return f"estimate vs recorded input, {self.turns} turns, median error: " + " · ".join(parts)


def usage_anchored(samples: Sequence[TurnSample], counts: Sequence[int]) -> Iterable[tuple[int, int]]:
    """The Go agent's usage-aware estimate of each usage turn from the one before it: that turn's
    recorded input plus the messages its context gained since (estimate, position); a turn
    whose context lost messages (a compaction) has nothing to start from and is skipped."""
    for k in range(1, len(samples)):
        prev, cur = samples[k - 1], samples[k]
        if not continues(prev, cur):
            continue
        before = set(prev.context)
        yield prev.recorded + sum(counts[i] for i in cur.context if i not in before), k


def usage_aware(samples: Sequence[TurnSample], counts: Sequence[int | float],
                alone: Sequence[float]) -> list[float]:
    """The estimate ctxtool makes of every usage turn from what came before it, as
    :func:`ctxtool.tokens.context.resolve` makes it: the previous turn's recorded input plus
    ``counts`` of the messages gained since; a turn with no recorded turn before it since the
    last compaction gets ``alone[k]``, the estimate of its whole context from the file alone."""
    out: list[float] = []
    for k, s in enumerate(samples):
        if k and continues(samples[k - 1], s):
            before = set(samples[k - 1].context)
            out.append(float(samples[k - 1].recorded + sum(counts[i] for i in s.context if i not in before)))
        else:
            out.append(float(alone[k]))
    return out


def accuracy(t: Transcript, tokenizers: Iterable[Any] | None = None, how: str = DEFAULT_SPLIT,
             model: str | None = None, prior: Calibration | None = None) -> Accuracy | None:
    """The accuracy figures of ``t`` (``None`` when no turn records input tokens); the fit
    starts from ``prior`` (default: the shipped ratios of the model's family). ``tokenizers``
    (default: all of :data:`ctxtool.tokens.bpe.TOKENIZERS`) are each measured from the file alone
    and usage-aware; the exact ones count the whole file again, so callers that show one line
    pass fewer."""
    # lazy: start-up (loaded only when this runs: ..tokens.bpe, ..tokens.context, ..tokens.count)
    from ..tokens.bpe import TOKENIZERS
    from ..tokens.context import last_model
    from ..tokens.count import count_messages, get_tokenizer

    samples = turn_samples(t)
    if not samples:
        return None
    ys = [float(s.recorded) for s in samples]
    acc = Accuracy(len(samples), how, redacted=round(redacted_share(t), 4))
    heur = get_tokenizer("heuristic")
    hc = count_messages(t.messages, heur)
    acc.default = ErrorStats.of(usage_aware(samples, hc, [heur.count(s.summary) + sum(hc[i] for i in s.context)
                                                         for s in samples]), ys)
    toks = [get_tokenizer(x) if isinstance(x, str) else x for x in (tokenizers if tokenizers is not None else TOKENIZERS)]
    for tok in toks:
        if tok.name == "calibrated":
            continue
        counts = count_messages(t.messages, tok)
        est = [(tok.count(s.summary) if s.summary else 0) + sum(counts[i] for i in s.context) for s in samples]
        acc.tokenizers[tok.name] = ErrorStats.of(est, ys)
        gap = ys[0] - est[0]
        acc.offset[tok.name] = ErrorStats.of([e + gap for e in est[1:]], ys[1:])
        pairs = list(usage_anchored(samples, counts))
        acc.anchored[tok.name] = ErrorStats.of([e for e, _ in pairs], [ys[k] for _, k in pairs])
    rows = context_rows(t, samples)
    segs = [s.segment for s in samples]
    msg_rows = [message_features(m) for m in t.messages]
    fam = prior or family_calibration(model or last_model(t), t.format)
    acc.family = fam
    acc.family_error = ErrorStats.of([fam.predict(r) for r in rows], ys)
    train, test = split(len(samples), how)
    if train and test:
        held = fit([rows[i] for i in train], [ys[i] for i in train], fam, segments=[segs[i] for i in train])
        acc.calibrated = ErrorStats.of([held.predict(rows[i], segment=segs[i]) for i in test], [ys[i] for i in test])
        # --tokenizer calibrated where usage exists: the usage-aware estimate with the fit's
        # counts, the fit alone after a compaction; held-back turns only
        est = usage_aware(samples, [held.tokens(r) for r in msg_rows],
                          [held.predict(r, segment=g) for r, g in zip(rows, segs, strict=True)])
        acc.anchored["calibrated"] = ErrorStats.of([est[i] for i in test], [ys[i] for i in test])
    full = fit(rows, ys, fam, segments=segs)
    err = acc.calibrated.p90 if acc.calibrated is not None else None
    acc.calibration = replace(full, error=err, source="file")
    return acc


def file_calibration(t: Transcript, model: str | None = None) -> Calibration:
    """The calibration an estimate of ``t`` uses: fitted to its usage turns when it records
    any (with the error measured on held-back turns), else its model family's."""
    acc = accuracy(t, tokenizers=(), model=model)
    if acc is not None and acc.calibration is not None:
        return acc.calibration
    # lazy: start-up (loaded only when this runs: ..tokens.context)
    from ..tokens.context import last_model

    return family_calibration(model or last_model(t), t.format)


# -- the calibrated tokenizer --------------------------------------------------------------------


class CalibratedTokenizer:
    """``--tokenizer calibrated``: tokens from characters by content kind, by a
    :class:`Calibration`: the file's own fit when it records usage (:meth:`fitted`), else
    its model family's shipped ratios. ``overhead`` is what a context holds beyond the
    file's messages (added to estimates that have no recorded usage to start from) and
    ``error`` the relative error (90th percentile) measured where it was not fitted."""

    name = "calibrated"

    def __init__(self, calibration: Calibration | None = None) -> None:
        self.calibration = calibration or family_calibration(None)

    @property
    def overhead(self) -> int:
        return round(self.calibration.overhead)

    @property
    def error(self) -> float | None:
        return self.calibration.error

    def count(self, text: str) -> int:
        return self.calibration.tokens(_text_features(text)) if text else 0

    def count_many(self, texts: Sequence[str]) -> list[int]:
        return [self.count(x) for x in texts]

    def count_message(self, m: Message) -> int:
        return self.calibration.tokens(message_features(m))

    def fitted(self, t: Transcript, model: str | None = None) -> CalibratedTokenizer:
        """This estimate fitted to ``t`` (see :func:`file_calibration`)."""
        return CalibratedTokenizer(file_calibration(t, model))


# -- error bars --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ErrorBar:
    """An estimate of the context with its uncertainty: ``tokens`` ± ``margin``, the margin
    the 90th percentile of the relative error (``relative``) measured for this kind of
    estimate (``basis`` says where); recorded tokens carry none."""

    tokens: int
    relative: float | None
    basis: str
    absolute: int | None = None  # a margin in tokens, where the error was measured so

    @property
    def margin(self) -> int:
        if self.absolute is not None:
            return self.absolute
        return math.ceil(self.tokens * self.relative) if self.relative else 0

    @property
    def low(self) -> int:
        return max(self.tokens - self.margin, 0)

    @property
    def high(self) -> int:
        return self.tokens + self.margin

    def straddles(self, value: int) -> bool:
        """Whether ``value`` lies within the bar: a verdict at it could go either way."""
        return self.margin > 0 and self.low < value <= self.high

    def to_json(self) -> dict[str, Any]:
        return {"tokens": self.tokens, "margin": self.margin, "low": self.low, "high": self.high,
                "error_p90": self.relative, "basis": self.basis}

    @property
    def text(self) -> str:
        if self.absolute == 0:
            return f"{self.tokens:,} ({self.basis}: exact)"
        if self.absolute is not None:
            return f"{self.tokens:,} ± {self.margin:,} (p90 error in tokens, {self.basis})"
        if self.relative is None:
            return f"{self.tokens:,} (error not measured: {self.basis})"
        return f"{self.tokens:,} ± {self.margin:,} (p90 error {self.relative:.1%}, {self.basis})"


def error_bar(tokens: int, source: str, tok: Any, acc: Accuracy | None, model: str | None = None,
              fmt: str | None = None, trailing: int | None = None) -> ErrorBar:
    """The uncertainty of a context estimate of ``tokens`` made by ``tok``: ``source``
    ``usage`` (the last recorded usage plus the messages after it) takes the error of that
    same estimate measured on the file's own turns; ``estimate`` (the file's messages alone)
    the file's measured error of ``tok`` when it records usage, else the error shipped for
    the model's family (``calibrated``: the error on its held-back turns, or its family's)."""
    name = getattr(tok, "name", "heuristic")
    if source == "usage" and trailing == 0:
        return ErrorBar(tokens, 0.0, "recorded usage, nothing after it", 0)
    if source == "usage":
        # the recorded part is exact: the error is that of the messages after it, in tokens,
        # as the same estimate of each turn from the turn before was off on this file
        s = acc.anchored.get(name) if acc is not None else None
        if s is not None and s.p90_tokens is not None:
            return ErrorBar(tokens, round(s.p90_tokens / tokens, 4) if tokens else None,
                            f"last usage + {name}, measured on {s.turns} turns of this file", s.p90_tokens)
        return ErrorBar(tokens, None, "no turn of this file to measure it on")
    if name == "calibrated" and tok.calibration.source == "file":
        # fitted to this file's usage, yet no usage since the last compaction: what the provider
        # holds beside the messages changes at a compaction, so the error is the one measured
        # on the first turn after a compaction in the corpus, not the file's held-back turns
        fam, spec = pick(shipped_ratios()["families"], model, fmt) or (GENERIC, {})
        first: dict[str, Any] = spec.get("after_compaction") or {}
        if first.get("turns"):
            return ErrorBar(tokens, first["p90"], f"calibrated after a compaction, measured on the first turn after "
                                                  f"{first['turns']} compactions in the corpus ({fam} family)")
    if name == "calibrated":
        err = getattr(tok, "error", None)
        src = tok.calibration.source
        where = "held-back turns of this file" if src == "file" else f"{src.split(':', 1)[-1]} family, files left out"
        return ErrorBar(tokens, err, f"calibrated, measured on {where}")
    if acc is not None and name in acc.tokenizers and acc.tokenizers[name].p90 is not None:
        return ErrorBar(tokens, acc.tokenizers[name].p90, f"{name}, measured on {acc.turns} turns of this file")
    fam, spec = pick(shipped_ratios()["families"], model, fmt) or (GENERIC, {})
    p90 = spec.get("tokenizers", {}).get(name, {}).get("p90")
    return ErrorBar(tokens, p90, f"{name}, measured on the corpus ({fam} family)")


def context_error(t: Transcript | None, tok: Any, tokens: int, source: str, model: str | None = None,
                  acc: Accuracy | None = None, trailing: int | None = None) -> ErrorBar:
    """:func:`error_bar` of a transcript's context estimate, measuring ``t``'s accuracy when
    it records usage (``acc`` when the caller has it)."""
    if acc is None and t is not None and any(m.usage is not None and m.usage.total > 0 for m in t.messages):
        acc = accuracy(t, tokenizers=[tok] if tok.name != "calibrated" else (), model=model)
    return error_bar(tokens, source, tok, acc, model, t.format if t is not None else None, trailing)


def flips(bar: ErrorBar, verdict_at: Callable[[int], Sequence[tuple[str, str]]]) -> list[str]:
    """The policies whose verdict differs somewhere within the bar: ``verdict_at(tokens)``
    gives each policy's (name, status) at a token count."""
    if not bar.margin:
        return []
    mid = dict(verdict_at(bar.tokens))
    out: list[str] = []
    for edge in (bar.low, bar.high):
        for name, status in verdict_at(edge):
            if mid.get(name) != status and name not in out:
                out.append(name)
    return out

