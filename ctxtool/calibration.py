"""How far token estimates are from what the model recorded, and an estimate fitted to it.

A transcript that records usage says, turn by turn, how many input tokens the provider
counted for the prompt of each API call. ctxtool's model normalizes every format's usage so
that this is ``input + cache_creation + cache_read`` (:func:`recorded_input`): Anthropic's
``input_tokens + cache_creation_input_tokens + cache_read_input_tokens`` (Claude Code, pi),
OpenAI's and Codex's ``input_tokens`` / ``prompt_tokens`` (which include the cached tokens;
the readers split those out as ``cache_read``), Gemini's ``input``.

For each turn that records it, :func:`turn_samples` finds the agent-visible context the call
saw (the messages before the turn, restarted at each compaction) and :func:`accuracy` sets
each tokenizer's estimate of it beside the recorded figure: median and 90th percentile of
the absolute relative error, and the share of turns within ±10 %.

The ``calibrated`` estimate (:class:`Calibration`) is a linear model of the recorded input:
a constant overhead (what the file does not hold: system prompt, tool schemas) plus tokens
per character for each content kind (:data:`KINDS`: prose, code, JSON, thinking) and tokens
per image, fitted by weighted non-negative least squares (weights ``1 / recorded``, so the
relative error is what is minimized), pulled lightly towards the family's shipped ratios so
that a handful of turns cannot produce a wild fit. Its error is measured on held-back
turns only (:data:`SPLITS`): the default split fits on the first half of the turns that
record usage and measures the second half (an agent calibrating as it goes would only know
the past); ``alternate`` fits on odd turns and measures even ones.

Where a file records no usage the ratios of the model's family are used
(``ctxtool/data/token_ratios.json``, learned from the corpus by ``make token-ratios``, each
with its measured error): :func:`family_calibration`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from .model import KIND_COMPACTION_SUMMARY, Block, Compaction, Message, Transcript, Usage

#: content kinds with a tokens-per-character rate of their own
KINDS = ("prose", "code", "json", "thinking")
#: the columns of the fit: the constant overhead, each kind's characters, the images
FEATURES = ("overhead", *KINDS, "image")
#: held-back splits: which usage turns the fit is trained on, the others measure it
SPLITS = ("half", "alternate")
DEFAULT_SPLIT = "alternate"
WITHIN = 0.10  # the target: estimates within ±10 % of the recorded input
GENERIC = "generic"  # the family used when the model is unknown

# characters that are rare in prose and common in code, shell output and diffs
_CODE_CHARS = frozenset("{}[]()<>=;:_/\\|&*#$@`'\"+-%^~")
_SAMPLE = 4000  # characters of a text looked at to tell its kind


def recorded_input(u: Usage) -> int:
    """The input tokens the provider counted for one call, cached ones included."""
    return u.input + u.cache_creation + u.cache_read


def text_kind(text: str) -> str:
    """``json`` for a text that is a JSON document, ``code`` for one dense in the symbols of
    code, shell output and diffs, else ``prose`` (judged on its first few thousand characters)."""
    s = text[:_SAMPLE]
    head = s.lstrip()[:1]
    if head in ("{", "[") and s.rstrip()[-1:] in ("}", "]") or head in ("{", "[") and len(text) > _SAMPLE:
        return "json"
    if not s:
        return "prose"
    sym = sum(1 for c in s if c in _CODE_CHARS)
    indented = s.count("\n ") + s.count("\n\t")
    lines = s.count("\n") + 1
    return "code" if sym > 0.06 * len(s) or (lines > 4 and indented > 0.4 * lines) else "prose"


def block_features(b: Block, out: list[float]) -> None:
    """Add one block's characters (or image) to a feature row (:data:`FEATURES` order)."""
    t = b.type
    if t == "image":
        out[5] += 1
        return
    if t == "tool_call":
        out[3] += len(b.name or "") + len(b.arguments_text())
        return
    text = b.text
    if not text:
        return
    if t == "thinking":
        out[4] += len(text)
        return
    out[1 + KINDS.index(text_kind(text))] += len(text)


def message_features(m: Message) -> list[float]:
    row = [0.0] * len(FEATURES)
    for b in m.content:
        block_features(b, row)
    return row


def _text_features(text: str) -> list[float]:
    row = [0.0] * len(FEATURES)
    if text:
        row[1 + KINDS.index(text_kind(text))] += len(text)
    return row


# -- the turns that record usage -------------------------------------------------------------


@dataclass(slots=True)
class TurnSample:
    """One API call that records usage: its turn number, the recorded input tokens, the
    messages of the context it saw (indices into the transcript's messages) and the text of
    a compaction summary that context starts from."""

    turn: int
    recorded: int
    context: list[int]
    summary: str = ""


def turn_samples(t: Transcript) -> list[TurnSample]:
    """The turns of ``t`` that record input tokens, each with the context its call saw: the
    agent-visible messages before it, restarted at a compaction entry (its summary and the
    messages it keeps) or at a compaction-summary message."""
    from .context import read_compaction
    from .replay.core import group_turns

    msgs = t.messages
    groups = group_turns(msgs)
    start_of = {g[0]: k for k, g in enumerate(groups)}
    member = {i for g in groups for i in g}
    pos = {id(m): i for i, m in enumerate(msgs)}
    ctx: list[int] = []
    summary = ""
    out: list[TurnSample] = []
    for e in t.entries:
        if isinstance(e, Compaction):
            summary, target = read_compaction(t, e, msgs)
            at = next((k for k, i in enumerate(ctx) if msgs[i] is target), None) if target is not None else None
            ctx = ctx[at:] if at is not None else []
            continue
        if not isinstance(e, Message):
            continue
        i = pos[id(e)]
        k = start_of.get(i)
        if k is not None:
            recorded = 0
            for j in groups[k]:
                u = msgs[j].usage
                if u is not None and u.total > 0:
                    recorded = recorded_input(u)
            if recorded > 0:
                out.append(TurnSample(k + 1, recorded, list(ctx), summary))
        if not e.agent_visible:
            continue
        if e.metadata.kind == KIND_COMPACTION_SUMMARY and (ctx or summary) and i not in member:
            ctx, summary = [], ""
        ctx.append(i)
    return out


# -- error figures ---------------------------------------------------------------------------


def _quantile(xs: Sequence[float], q: float) -> float:
    """The ``q`` quantile of sorted ``xs`` (linear between neighbours, as numpy's default)."""
    if not xs:
        return math.nan
    p = q * (len(xs) - 1)
    lo = math.floor(p)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (p - lo)


@dataclass(frozen=True, slots=True)
class ErrorStats:
    """Relative errors ``|estimate − recorded| / recorded`` over some turns."""

    turns: int
    median: float | None
    p90: float | None
    within: float | None  # share of turns within ±10 %
    bias: float | None  # median signed error: above 0 the estimate is too high

    @classmethod
    def of(cls, estimates: Sequence[float], recorded: Sequence[float]) -> ErrorStats:
        signed = [(e - r) / r for e, r in zip(estimates, recorded, strict=True) if r > 0]
        if not signed:
            return cls(0, None, None, None, None)
        ab = sorted(abs(x) for x in signed)
        return cls(
            len(ab),
            round(_quantile(ab, 0.5), 4),
            round(_quantile(ab, 0.9), 4),
            round(sum(1 for x in ab if x <= WITHIN + 1e-12) / len(ab), 4),
            round(_quantile(sorted(signed), 0.5), 4),
        )

    def to_json(self) -> dict[str, Any]:
        return {"turns": self.turns, "median": self.median, "p90": self.p90, "within_10": self.within, "bias": self.bias}

    @property
    def line(self) -> str:
        if not self.turns or self.median is None or self.p90 is None or self.within is None:
            return "no turns"
        return f"median {self.median:.1%} · p90 {self.p90:.1%} · {self.within:.0%} of {self.turns} within ±10%"


# -- the fit ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Calibration:
    """Tokens = overhead + Σ rate[kind] × characters of that kind + image × images.

    ``error`` is the 90th percentile of the relative error measured where the fit was not
    trained (held-back turns, or the corpus for a family's shipped ratios); ``source`` says
    where the figures come from (``file`` or ``family:<name>``)."""

    overhead: float
    rates: dict[str, float]
    image: float
    error: float | None = None
    source: str = "family:" + GENERIC
    trained_on: int = 0

    def coefficients(self) -> list[float]:
        return [self.overhead, *(self.rates[k] for k in KINDS), self.image]

    def predict(self, row: Sequence[float], overhead: bool = True) -> float:
        c = self.coefficients()
        return (c[0] if overhead else 0.0) + sum(a * b for a, b in zip(c[1:], row[1:], strict=True))

    def tokens(self, row: Sequence[float]) -> int:
        """Tokens of content (no overhead), rounded up."""
        return math.ceil(self.predict(row, overhead=False))

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "overhead": round(self.overhead),
            "tokens_per_char": {k: round(v, 4) for k, v in self.rates.items()},
            "tokens_per_image": round(self.image, 1),
            "error_p90": self.error,
            "trained_on": self.trained_on,
        }

    @classmethod
    def from_coefficients(cls, c: Sequence[float], **kw: Any) -> Calibration:
        return cls(c[0], dict(zip(KINDS, c[1 : 1 + len(KINDS)], strict=True)), c[-1], **kw)


def nnls(rows: Sequence[Sequence[float]], ys: Sequence[float], weights: Sequence[float],
         prior: Sequence[float], strength: float, sweeps: int = 400) -> list[float]:
    """Weighted least squares with non-negative coefficients, pulled towards ``prior``:
    minimize ``Σ w (x·c − y)² + strength · Σ (s_j (c_j − prior_j))²`` for ``c ≥ 0``, where
    ``s_j`` is column j's weighted scale (so the pull does not depend on its units). Solved
    by cyclic coordinate descent on the normal equations (a convex problem of a few
    columns: it converges to the one minimum)."""
    n = len(prior)
    g = [[0.0] * n for _ in range(n)]
    b = [0.0] * n
    for x, y, w in zip(rows, ys, weights, strict=True):
        for i in range(n):
            xi = x[i] * w
            if xi == 0.0:
                continue
            b[i] += xi * y
            gi = g[i]
            for j in range(n):
                gi[j] += xi * x[j]
    for j in range(n):
        pull = strength * (g[j][j] if g[j][j] > 0 else 1.0)
        g[j][j] += pull
        b[j] += pull * prior[j]
    c = list(prior)
    for _ in range(sweeps):
        moved = 0.0
        for j in range(n):
            if g[j][j] <= 0:
                continue
            r = b[j] - sum(g[j][k] * c[k] for k in range(n) if k != j)
            v = max(r / g[j][j], 0.0)
            moved = max(moved, abs(v - c[j]) / (abs(c[j]) + 1e-9))
            c[j] = v
        if moved < 1e-9:
            break
    return c


PRIOR_STRENGTH = 0.02


def fit(rows: Sequence[Sequence[float]], ys: Sequence[float], prior: Calibration | None = None,
        source: str = "file") -> Calibration:
    """The calibration of ``rows`` (feature rows, :data:`FEATURES` order) to the recorded
    ``ys``, towards ``prior`` (default: the generic family's ratios)."""
    p = prior or family_calibration(None)
    w = [1.0 / (y * y) for y in ys]
    c = nnls(rows, ys, w, p.coefficients(), PRIOR_STRENGTH)
    return Calibration.from_coefficients(c, source=source, trained_on=len(ys))


def split(n: int, how: str = DEFAULT_SPLIT) -> tuple[list[int], list[int]]:
    """Positions of ``n`` usage turns to train on and to hold back."""
    if how == "alternate":
        return list(range(0, n, 2)), list(range(1, n, 2))
    if how == "half":
        h = (n + 1) // 2
        return list(range(h)), list(range(h, n))
    raise ValueError(f"unknown split {how!r}; choose one of: {', '.join(SPLITS)}")


# -- family ratios shipped with the registry -----------------------------------------------------


RATIOS_FILE = "data/token_ratios.json"


@cache
def _ratios() -> dict[str, Any]:
    """The shipped family ratios (none before ``make token-ratios`` first wrote them)."""
    try:
        data: dict[str, Any] = json.loads(resources.files("ctxtool").joinpath(RATIOS_FILE).read_text("utf-8"))
    except FileNotFoundError:
        return {"families": {}}
    return data


def heuristic_calibration() -> Calibration:
    """The seeds' heuristic as a calibration: no overhead, a token per 4 characters of any
    kind, an image ~1,200 tokens. The starting point the family ratios are learned from."""
    from .model import IMAGE_TOKENS

    return Calibration(0.0, dict.fromkeys(KINDS, 0.25), float(IMAGE_TOKENS), None, "heuristic")


def family_of(model: str | None) -> str:
    """The family whose ratios apply to a model: its registry entry's provider, else the
    one its name's prefix names (:data:`FAMILY_PREFIXES`), else ``generic``."""
    if not model:
        return GENERIC
    from .registry import lookup

    info = lookup(model)
    prov = getattr(info, "provider", None) if info is not None else None
    if isinstance(prov, str) and prov in FAMILY_PREFIXES:
        return prov
    name = model.lower().rsplit("/", 1)[-1]
    return next((fam for fam, ps in FAMILY_PREFIXES.items() if name.startswith(ps)), GENERIC)


def family_calibration(model: str | None) -> Calibration:
    """The shipped calibration of the model's family (``generic`` when unknown)."""
    fam = family_of(model)
    fams = _ratios()["families"]
    spec = fams.get(fam) or fams.get(GENERIC)
    if spec is None:
        return heuristic_calibration()
    fam = fam if fam in fams else GENERIC
    c = [spec["overhead"], *(spec["tokens_per_char"][k] for k in KINDS), spec["tokens_per_image"]]
    return Calibration.from_coefficients(c, error=spec.get("error", {}).get("p90"), source=f"family:{fam}",
                                         trained_on=int(spec.get("turns", 0)))


# -- accuracy of one transcript --------------------------------------------------------------------


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

    def to_json(self) -> dict[str, Any]:
        return {
            "turns": self.turns,
            "target": WITHIN,
            "split": self.split,
            "tokenizers": {k: {**v.to_json(), "offset": self.offset[k].to_json() if k in self.offset else None,
                               "anchored": self.anchored[k].to_json() if k in self.anchored else None}
                           for k, v in self.tokenizers.items()},
            "calibrated": self.calibrated.to_json() if self.calibrated else None,
            "calibration": self.calibration.to_json() if self.calibration else None,
            "family": {**self.family.to_json(), "measured": self.family_error.to_json() if self.family_error else None}
            if self.family else None,
        }

    def lines(self) -> list[str]:
        """One short line per estimate, for people."""
        out = [f"{name}: {s.line}" for name, s in self.tokenizers.items()]
        if self.calibrated is not None:
            out.append(f"calibrated ({self.split} split, held-back turns): {self.calibrated.line}")
        return out

    @property
    def summary(self) -> str:
        """One line: the calibrated estimate's held-back error beside the heuristic's."""
        parts = [f"{k} {v.median:.0%}" for k, v in self.tokenizers.items() if v.median is not None]
        if self.calibrated is not None and self.calibrated.median is not None and self.calibrated.within is not None:
            parts.append(f"calibrated {self.calibrated.median:.1%} ({self.calibrated.within:.0%} of "
                         f"{self.calibrated.turns} held-back turns within ±10%)")
        return f"estimate vs recorded input, {self.turns} turns, median error: " + " · ".join(parts)


def context_rows(t: Transcript, samples: Sequence[TurnSample]) -> list[list[float]]:
    """The feature row of each sample's context."""
    per_msg = [message_features(m) for m in t.messages]
    rows = []
    for s in samples:
        row = _text_features(s.summary)
        row[0] = 1.0
        for i in s.context:
            for j, v in enumerate(per_msg[i]):
                if v:
                    row[j] += v
        rows.append(row)
    return rows


def _anchored(samples: Sequence[TurnSample], counts: Sequence[int]) -> Iterable[tuple[int, int]]:
    """Seed 000's usage-aware estimate of each usage turn from the one before it: that turn's
    recorded input plus the messages its context gained since (estimate, position); a turn
    whose context lost messages (a compaction) has nothing to start from and is skipped."""
    for k in range(1, len(samples)):
        prev, cur = samples[k - 1], samples[k]
        before = set(prev.context)
        if cur.summary != prev.summary or not before.issubset(cur.context):
            continue
        yield prev.recorded + sum(counts[i] for i in cur.context if i not in before), k


def accuracy(t: Transcript, tokenizers: Iterable[Any] | None = None, how: str = DEFAULT_SPLIT,
             model: str | None = None, prior: Calibration | None = None) -> Accuracy | None:
    """The accuracy figures of ``t`` (``None`` when no turn records input tokens); the fit
    starts from ``prior`` (default: the shipped ratios of the model's family)."""
    from .context import last_model
    from .tokens import TOKENIZERS, count_messages, get_tokenizer

    samples = turn_samples(t)
    if not samples:
        return None
    ys = [float(s.recorded) for s in samples]
    acc = Accuracy(len(samples), how)
    toks = [get_tokenizer(x) if isinstance(x, str) else x for x in (tokenizers if tokenizers is not None else TOKENIZERS)]
    for tok in toks:
        if tok.name == "calibrated":
            continue
        counts = count_messages(t.messages, tok)
        est = [(tok.count(s.summary) if s.summary else 0) + sum(counts[i] for i in s.context) for s in samples]
        acc.tokenizers[tok.name] = ErrorStats.of(est, ys)
        gap = ys[0] - est[0]
        acc.offset[tok.name] = ErrorStats.of([e + gap for e in est[1:]], ys[1:])
        pairs = list(_anchored(samples, counts))
        acc.anchored[tok.name] = ErrorStats.of([e for e, _ in pairs], [ys[k] for _, k in pairs])
    rows = context_rows(t, samples)
    fam = prior or family_calibration(model or last_model(t))
    acc.family = fam
    acc.family_error = ErrorStats.of([fam.predict(r) for r in rows], ys)
    train, test = split(len(samples), how)
    if train and test:
        held = fit([rows[i] for i in train], [ys[i] for i in train], fam)
        acc.calibrated = ErrorStats.of([held.predict(rows[i]) for i in test], [ys[i] for i in test])
    full = fit(rows, ys, fam)
    err = acc.calibrated.p90 if acc.calibrated is not None else None
    acc.calibration = Calibration(full.overhead, full.rates, full.image, err, "file", len(samples))
    counts = [full.tokens(message_features(m)) for m in t.messages]  # what a usage-aware estimate adds
    pairs = list(_anchored(samples, counts))
    acc.anchored["calibrated"] = ErrorStats.of([e for e, _ in pairs], [ys[k] for _, k in pairs])
    return acc


def file_calibration(t: Transcript, model: str | None = None) -> Calibration:
    """The calibration an estimate of ``t`` uses: fitted to its usage turns when it records
    any (with the error measured on held-back turns), else its model family's."""
    acc = accuracy(t, tokenizers=(), model=model)
    if acc is not None and acc.calibration is not None:
        return acc.calibration
    from .context import last_model

    return family_calibration(model or last_model(t))


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


# -- learning the family ratios ------------------------------------------------------------------


def learn_families(transcripts: Iterable[tuple[str, Transcript]]) -> dict[str, Any]:
    """Family ratios learned from transcripts that record usage (``(name, transcript)``
    pairs), in the shape of ``ctxtool/data/token_ratios.json``: each file's calibration is
    fitted on its own turns (from the heuristic), and a family's ratios are the median of
    its files' (one odd file, such as a session whose text was redacted, does not move
    them). The error is measured file by file with the median of the other files' ratios
    (leave one file out; a family of one file has none). ``generic`` pools every family."""
    from statistics import median

    from .context import last_model

    from .tokens import TOKENIZERS, count_messages, get_tokenizer

    start = heuristic_calibration()
    data: dict[str, list[tuple[str, list[list[float]], list[float], list[float]]]] = {}
    raws: dict[str, list[tuple[dict[str, list[int]], list[float]]]] = {}
    for name, t in transcripts:
        samples = turn_samples(t)
        if not samples:
            continue
        rows = context_rows(t, samples)
        ys = [float(s.recorded) for s in samples]
        coef = fit(rows, ys, start).coefficients()
        raw = {}
        for tname in TOKENIZERS:
            tok = get_tokenizer(tname)
            counts = count_messages(t.messages, tok)
            raw[tname] = [(tok.count(s.summary) if s.summary else 0) + sum(counts[i] for i in s.context) for s in samples]
        for fam in {family_of(last_model(t)), GENERIC}:
            data.setdefault(fam, []).append((name, rows, ys, coef))
            raws.setdefault(fam, []).append((raw, ys))
    out: dict[str, Any] = {}
    for fam, files in sorted(data.items()):
        c = Calibration.from_coefficients([median(col) for col in zip(*(f[3] for f in files), strict=True)])
        est: list[float] = []
        rec: list[float] = []
        for k, (_, rows, ys, _) in enumerate(files):
            others = [f[3] for j, f in enumerate(files) if j != k]
            if others:
                held = Calibration.from_coefficients([median(col) for col in zip(*others, strict=True)])
                est += [held.predict(r) for r in rows]
                rec += ys
        out[fam] = {
            "overhead": round(c.overhead),
            "tokens_per_char": {k: round(v, 4) for k, v in c.rates.items()},
            "tokens_per_image": round(c.image, 1),
            "turns": sum(len(f[2]) for f in files),
            "files": sorted(f[0] for f in files),
            "error": {**ErrorStats.of(est, rec).to_json(), "measured": "leave one file out"},
            "tokenizers": {n: ErrorStats.of([e for r, _ in raws[fam] for e in r[n]],
                                            [y for _, ys in raws[fam] for y in ys]).to_json() for n in TOKENIZERS},
        }
    return {"_comment": RATIOS_COMMENT, "families": out}


#: model-name prefixes of a family, for a model the registry does not list
FAMILY_PREFIXES = {"anthropic": ("claude",), "openai": ("gpt", "o1", "o3", "o4", "codex"), "google": ("gemini",)}
RATIOS_COMMENT = (
    "Token ratios per model family, learned from the real transcripts of the corpus by `make token-ratios` "
    "(ctxtool.calibration.learn_families): input tokens = overhead + tokens_per_char[kind] x characters + "
    "tokens_per_image x images. error: the relative error of these ratios measured on each file with ratios "
    "learned without it. Used by --tokenizer calibrated where a file records no usage."
)


# -- error bars --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ErrorBar:
    """An estimate of the context with its uncertainty: ``tokens`` ± ``margin``, the margin
    the 90th percentile of the relative error (``relative``) measured for this kind of
    estimate (``basis`` says where); recorded tokens carry none."""

    tokens: int
    relative: float | None
    basis: str

    @property
    def margin(self) -> int:
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
        if self.relative is None:
            return f"{self.tokens:,} (error not measured: {self.basis})"
        return f"{self.tokens:,} ± {self.margin:,} (p90 error {self.relative:.1%}, {self.basis})"


def error_bar(tokens: int, source: str, tok: Any, acc: Accuracy | None, model: str | None = None) -> ErrorBar:
    """The uncertainty of a context estimate of ``tokens`` made by ``tok``: ``source``
    ``usage`` (the last recorded usage plus the messages after it) takes the error of that
    same estimate measured on the file's own turns; ``estimate`` (the file's messages alone)
    the file's measured error of ``tok`` when it records usage, else the error shipped for
    the model's family (``calibrated``: the error on its held-back turns, or its family's)."""
    name = getattr(tok, "name", "heuristic")
    if source == "usage":
        s = acc.anchored.get(name) if acc is not None else None
        if s is not None and s.p90 is not None:
            return ErrorBar(tokens, s.p90, f"last usage + {name}, measured on {s.turns} turns of this file")
        return ErrorBar(tokens, None, "no turn of this file to measure it on")
    if name == "calibrated":
        err = getattr(tok, "error", None)
        src = tok.calibration.source
        where = "held-back turns of this file" if src == "file" else f"{src.split(':', 1)[-1]} family, files left out"
        return ErrorBar(tokens, err, f"calibrated, measured on {where}")
    if acc is not None and name in acc.tokenizers and acc.tokenizers[name].p90 is not None:
        return ErrorBar(tokens, acc.tokenizers[name].p90, f"{name}, measured on {acc.turns} turns of this file")
    fam = family_of(model)
    spec = _ratios()["families"].get(fam) or _ratios()["families"].get(GENERIC) or {}
    p90 = spec.get("tokenizers", {}).get(name, {}).get("p90")
    return ErrorBar(tokens, p90, f"{name}, measured on the corpus ({fam if fam in _ratios()['families'] else GENERIC} family)")


def context_error(t: Transcript | None, tok: Any, tokens: int, source: str, model: str | None = None,
                  acc: Accuracy | None = None) -> ErrorBar:
    """:func:`error_bar` of a transcript's context estimate, measuring ``t``'s accuracy when
    it records usage (``acc`` when the caller has it)."""
    if acc is None and t is not None and any(m.usage is not None and m.usage.total > 0 for m in t.messages):
        acc = accuracy(t, tokenizers=[tok] if tok.name != "calibrated" else (), model=model)
    return error_bar(tokens, source, tok, acc, model)


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
