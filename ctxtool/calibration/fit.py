"""Error figures, the calibration and its fit (weighted non-negative least squares)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import compress
from operator import mul
from typing import Any

from ..tokens.heuristic import CHARS_PER_TOKEN, IMAGE_TOKENS
from .features import KINDS

#: held-back splits: which usage turns the fit is trained on, the others measure it
SPLITS = ("half", "alternate")
DEFAULT_SPLIT = "alternate"
WITHIN = 0.10  # the target: estimates within ±10 % of the recorded input


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
    p90_tokens: int | None = None  # the 90th percentile of |estimate − recorded| in tokens

    @classmethod
    def of(cls, estimates: Sequence[float], recorded: Sequence[float]) -> ErrorStats:
        signed = [(e - r) / r for e, r in zip(estimates, recorded, strict=True) if r > 0]
        if not signed:
            return cls(0, None, None, None, None)
        ab = sorted(abs(x) for x in signed)
        tokens = sorted(abs(e - r) for e, r in zip(estimates, recorded, strict=True) if r > 0)
        return cls(
            len(ab),
            round(_quantile(ab, 0.5), 4),
            round(_quantile(ab, 0.9), 4),
            round(sum(1 for x in ab if x <= WITHIN + 1e-12) / len(ab), 4),
            round(_quantile(sorted(signed), 0.5), 4),
            math.ceil(_quantile(tokens, 0.9)),
        )

    def to_json(self) -> dict[str, Any]:
        return {"turns": self.turns, "median": self.median, "p90": self.p90, "within_10": self.within, "bias": self.bias,
                "p90_tokens": self.p90_tokens}

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
    source: str = "family:generic"
    trained_on: int = 0
    per_message: float = 0.0
    #: the overhead fitted for each stretch between compactions (segment number, overhead):
    #: a compaction changes what the provider holds beside the messages
    segments: tuple[tuple[int, float], ...] = ()

    def overhead_at(self, segment: int) -> float:
        """The overhead of a segment: its own fit, else that of the latest fitted segment
        before it (a stretch no turn was fitted on starts from what came before), else
        :attr:`overhead`."""
        got = [o for s, o in self.segments if s <= segment]
        return got[-1] if got else self.overhead

    def coefficients(self) -> list[float]:
        return [self.overhead, *(self.rates[k] for k in KINDS), self.image, self.per_message]

    def predict(self, row: Sequence[float], overhead: bool = True, segment: int | None = None) -> float:
        c = self.coefficients()
        base = (self.overhead_at(segment) if segment is not None else c[0]) if overhead else 0.0
        return base + sum(a * b for a, b in zip(c[1:], row[1:], strict=True))

    def tokens(self, row: Sequence[float]) -> int:
        """Tokens of content (no overhead), rounded up."""
        return math.ceil(self.predict(row, overhead=False))

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "overhead": round(self.overhead),
            "tokens_per_char": {k: round(v, 4) for k, v in self.rates.items()},
            "tokens_per_image": round(self.image, 1),
            "tokens_per_message": round(self.per_message, 2),
            "error_p90": self.error,
            "trained_on": self.trained_on,
        }

    def spec(self) -> dict[str, Any]:
        """The figures as ``token_ratios.json`` holds them."""
        return {"overhead": round(self.overhead), "tokens_per_char": {k: round(v, 4) for k, v in self.rates.items()},
                "tokens_per_image": round(self.image, 1), "tokens_per_message": round(self.per_message, 2)}

    @classmethod
    def from_spec(cls, spec: dict[str, Any], **kw: Any) -> Calibration:
        return cls.from_coefficients([spec["overhead"], *(spec["tokens_per_char"][k] for k in KINDS),
                                      spec["tokens_per_image"], spec.get("tokens_per_message", 0.0)], **kw)

    @classmethod
    def from_coefficients(cls, c: Sequence[float], **kw: Any) -> Calibration:
        n = len(KINDS)
        return cls(c[0], dict(zip(KINDS, c[1 : 1 + n], strict=True)), c[1 + n], per_message=c[2 + n], **kw)


def nnls(rows: Sequence[Sequence[float]], ys: Sequence[float], weights: Sequence[float],
         prior: Sequence[float], strength: float, sweeps: int = 400,
         upper: Sequence[float] | None = None) -> list[float]:
    """Weighted least squares with non-negative coefficients, pulled towards ``prior``:
    minimize ``Σ w (x·c − y)² + strength · Σ (s_j (c_j − prior_j))²`` for
    ``0 ≤ c ≤ upper`` (no upper bound where ``upper`` is ``inf`` or not given), where
    ``s_j`` is column j's weighted scale (so the pull does not depend on its units). Solved
    by cyclic coordinate descent on the normal equations (a convex problem of a few
    columns: it converges to the one minimum)."""
    n = len(prior)
    g, b = normal_equations(rows, ys, weights, prior, strength)
    c = list(prior)
    # each column's sweep step, made once: its row of g without the diagonal and which of c it
    # multiplies (the sum over k != j in C: its terms and their order a loop's), its diagonal,
    # b, its bound. The comparisons below answer as max() and min() did, -0.0 and NaN included.
    top = [math.inf] * n if upper is None else list(upper)
    steps = [(j, b[j], g[j][j], [g[j][k] for k in range(n) if k != j], [k != j for k in range(n)], top[j])
             for j in range(n) if g[j][j] > 0]
    for _ in range(sweeps):
        moved = 0.0
        for j, bj, gjj, row, mask, hi in steps:
            v = (bj - sum(map(mul, row, compress(c, mask)))) / gjj
            if v < 0.0:
                v = 0.0
            if hi < v:
                v = hi
            old = c[j]
            d = abs(v - old) / (abs(old) + 1e-9)
            if d > moved:
                moved = d
            c[j] = v
        if moved < 1e-9:
            break
    return c


def normal_equations(rows: Sequence[Sequence[float]], ys: Sequence[float], weights: Sequence[float],
                     prior: Sequence[float], strength: float) -> tuple[list[list[float]], list[float]]:
    """:func:`nnls`'s normal equations ``g c = b``, with the pull towards ``prior`` added."""
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
    return g, b


PRIOR_STRENGTH = 0.002
#: the most tokens a character of any kind can cost: a kind seen in few characters beside a
#: large overhead is nearly collinear with it, and unbounded its rate can run to several
#: tokens a character (2.8 for the prose of one corpus session), which no tokenizer gives text
MAX_TOKENS_PER_CHAR = 1.0


def fit(rows: Sequence[Sequence[float]], ys: Sequence[float], prior: Calibration | None = None,
        source: str = "file", segments: Sequence[int] | None = None) -> Calibration:
    """The calibration of ``rows`` (feature rows, :data:`FEATURES` order) to the recorded
    ``ys``, towards ``prior`` (default: the generic family's ratios). With ``segments`` (each
    row's :attr:`~ctxtool.calibration.features.TurnSample.segment`) the overhead is fitted for each
    segment apart, the rates over all; :attr:`Calibration.overhead` is then the last one's."""
    p = prior or heuristic_calibration()
    w = [1.0 / (y * y) for y in ys]
    pc = p.coefficients()
    inf = math.inf
    bounds = [*(MAX_TOKENS_PER_CHAR for _ in KINDS), inf, inf]  # the kinds' rates; images and messages free
    if not segments:
        c = nnls(rows, ys, w, pc, PRIOR_STRENGTH, upper=[inf, *bounds])
        return Calibration.from_coefficients(c, source=source, trained_on=len(ys))
    ids = sorted(set(segments))
    col = {s: j for j, s in enumerate(ids)}
    wide = []
    for r, s in zip(rows, segments, strict=True):
        x = [0.0] * len(ids)
        x[col[s]] = r[0]
        wide.append([*x, *r[1:]])
    c = nnls(wide, ys, w, [pc[0]] * len(ids) + pc[1:], PRIOR_STRENGTH, upper=[inf] * len(ids) + bounds)
    per = tuple((s, c[col[s]]) for s in ids)
    return Calibration.from_coefficients([per[-1][1], *c[len(ids):]], source=source, trained_on=len(ys),
                                         segments=per)


def after_compaction(samples: Sequence[Any], rows: Sequence[Sequence[float]],
                     prior: Calibration | None = None) -> tuple[list[float], list[float]]:
    """The calibrated estimate of the first usage turn after each compaction, fitted on every
    turn before it (the one turn the default estimate makes from characters alone, with the
    overhead of the segment before), and the recorded input it is judged against."""
    est: list[float] = []
    rec: list[float] = []
    segs = [s.segment for s in samples]
    ys = [float(s.recorded) for s in samples]
    for k in range(1, len(samples)):
        if segs[k] != segs[k - 1]:
            c = fit(rows[:k], ys[:k], prior, segments=segs[:k])
            est.append(c.predict(rows[k], segment=segs[k]))
            rec.append(ys[k])
    return est, rec


def split(n: int, how: str = DEFAULT_SPLIT) -> tuple[list[int], list[int]]:
    """Positions of ``n`` usage turns to train on and to hold back."""
    if how == "alternate":
        return list(range(0, n, 2)), list(range(1, n, 2))
    if how == "half":
        h = (n + 1) // 2
        return list(range(h)), list(range(h, n))
    raise ValueError(f"unknown split {how!r}; choose one of: {', '.join(SPLITS)}")



def heuristic_calibration() -> Calibration:
    """The plain heuristic as a calibration: no overhead, a token per 4 characters of any
    kind, an image ~1,200 tokens. The starting point the family ratios are learned from."""
    return Calibration(0.0, dict.fromkeys(KINDS, 1 / CHARS_PER_TOKEN), float(IMAGE_TOKENS), None, "heuristic")

