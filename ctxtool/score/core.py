"""Score a compaction's summary at a fixed budget, beside controls on the same cut: probes drawn
from the part the compaction removed (less what the kept messages hold) are checked against the
summary's first ``budget`` tokens, the appended file lists and pins taken out and never credited;
the same cut is scored for each control, false claims are listed, and retention is the weighted
mean over the kinds with probes."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import CtxtoolError, Failure
from ..model import Message, Transcript
from ..text import lazyre
from ..tokens.context import is_summary, view
from ..tokens.count import Tokenizer, count_messages, get_tokenizer
from . import quality
from .claims import FalseClaim, false_claims
from .controls import CONTROLS, controls, serialize
from .kinds import PROBE_KINDS
from .probes import CompactionCut, Probe, text_of
from .text import Haystack

if TYPE_CHECKING:
    from ..summarizers import Summarizer
    from .judge import JudgeReport

BUDGET = 3000  # tokens of summary scored: about a product summary's size
CURVE = (250, 500, 1000, 2000, 3000, 5000, 8000, 12000)
_PREFIX = "[Previous conversation summary]"
_LISTS = lazyre.compile(r"\n*<(read-files|modified-files)>.*?</\1>", re.S)
_LEDGER = lazyre.compile(r"^#{1,4} Read Set\s*$.*?(?=^#{1,4} |\Z)", re.S | re.M)


@dataclass(frozen=True, slots=True)
class ProbeResult:
    probe: Probe
    kept: bool

    def to_json(self) -> dict[str, Any]:
        p = self.probe
        return {"kind": p.kind, "text": p.text, "kept": self.kept, "message": p.message, "note": p.note}


@dataclass(frozen=True, slots=True)
class KindScore:
    kind: str
    weight: float
    probes: int
    kept: int

    @property
    def retention(self) -> float | None:
        return self.kept / self.probes if self.probes else None

    def to_json(self) -> dict[str, Any]:
        r = self.retention
        return {"kind": self.kind, "weight": self.weight, "probes": self.probes, "kept": self.kept,
                "retention": None if r is None else round(r, 4)}


def kind_scores(results: Sequence[ProbeResult]) -> list[KindScore]:
    out = []
    for k in PROBE_KINDS.values():
        rs = [r for r in results if r.probe.kind == k.name]
        out.append(KindScore(k.name, k.weight, len(rs), sum(1 for r in rs if r.kept)))
    return out


def weighted(results: Sequence[ProbeResult]) -> float | None:
    """The weighted mean of the kinds' retentions; None when nothing was probed (no retention to
    claim: a part with no probe is not "100% kept")."""
    ks = [k for k in kind_scores(results) if k.probes]
    total = sum(k.weight for k in ks)
    return sum(k.weight * (k.retention or 0.0) for k in ks) / total if total else None


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


@dataclass(slots=True)
class Scored:
    """One text (the summary or a control) scored on the cut at the budget."""

    name: str
    tokens: int  # its tokens (without the pipeline's lists)
    results: list[ProbeResult]
    claims: list[FalseClaim] = field(default_factory=list)
    quality: str | None = None  # why the quality rules reject it, or None

    @property
    def retention(self) -> float | None:
        return weighted(self.results)

    @property
    def continuation(self) -> float | None:
        rs = [r for r in self.results if r.probe.kind.startswith("continuation")]
        return sum(r.kept for r in rs) / len(rs) if rs else None

    def to_json(self) -> dict[str, Any]:
        c = self.continuation
        return {"name": self.name, "tokens": self.tokens, "retention": _round(self.retention),
                "continuation": None if c is None else round(c, 4),
                "kinds": [k.to_json() for k in kind_scores(self.results) if k.probes],
                "false_claims": [x.to_json() for x in self.claims], "quality": self.quality}


@dataclass(slots=True)
class ScoreReport:
    """What the summary of a compaction kept of the part it replaced, at ``budget`` tokens,
    beside the controls (``retention``: the weighted mean over the kinds with probes)."""

    before: str
    after: str
    format: str
    tokens_before: int
    tokens_after: int
    tokens_removed: int
    messages_before: int
    messages_after: int
    lost_messages: int
    budget: int
    summary: Scored
    controls: list[Scored] = field(default_factory=list)
    curve: list[tuple[int, float | None]] = field(default_factory=list)
    pipeline: dict[str, int] = field(default_factory=dict)  # tokens of what the pipeline appended
    judge: JudgeReport | None = None

    @property
    def results(self) -> list[ProbeResult]:
        return self.summary.results

    @property
    def kinds(self) -> list[KindScore]:
        return kind_scores(self.results)

    @property
    def retention(self) -> float | None:
        return self.summary.retention

    @property
    def continuation(self) -> float | None:
        return self.summary.continuation

    @property
    def claims(self) -> list[FalseClaim]:
        return self.summary.claims

    @property
    def ratio(self) -> float | None:
        return self.tokens_before / self.tokens_after if self.tokens_after else None

    @property
    def compression(self) -> float | None:
        """Tokens removed per token of summary."""
        return self.tokens_removed / self.summary.tokens if self.summary.tokens else None

    @property
    def lost(self) -> list[Probe]:
        return [r.probe for r in self.results if not r.kept]

    def margins(self) -> dict[str, float]:
        """By how much the summary's retention beats each control's (in points of 1.0); empty when
        nothing was probed."""
        r = self.retention
        return {c.name: r - c.retention for c in self.controls if r is not None and c.retention is not None}

    def to_json(self) -> dict[str, Any]:
        r, c = self.ratio, self.compression
        return {
            "before": self.before,
            "after": self.after,
            "format": self.format,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "tokens_removed": self.tokens_removed,
            "ratio": None if r is None else round(r, 3),
            "compression": None if c is None else round(c, 3),
            "messages_before": self.messages_before,
            "messages_after": self.messages_after,
            "lost_messages": self.lost_messages,
            "budget": self.budget,
            "probes": len(self.results),
            "kept": sum(1 for x in self.results if x.kept),
            "retention": _round(self.retention),
            "continuation": None if self.continuation is None else round(self.continuation, 4),
            "summary": self.summary.to_json(),
            "lost": [x.to_json() for x in self.results if not x.kept],
            "controls": [x.to_json() for x in self.controls],
            "margins": {k: round(v, 4) for k, v in self.margins().items()},
            "curve": [{"tokens": t, "retention": _round(v)} for t, v in self.curve],
            "pipeline": self.pipeline,
            "judge": None if self.judge is None else self.judge.to_json(),
        }


def _key(m: Message) -> tuple[str, ...]:
    """A message's content: what 'AFTER holds it verbatim' compares."""
    return (m.role, *(f"call {b.name} {b.arguments_text()}" if b.type == "tool_call" else b.text
                      for b in m.content if b.type == "tool_call" or b.text))


def lost_part(before: Sequence[Message], after: Sequence[Message]) -> list[tuple[int, Message]]:
    """The messages of ``before`` that ``after`` does not hold (by content, each copy once)."""
    have = Counter(_key(m) for m in after)
    out = []
    for i, m in enumerate(before):
        k = _key(m)
        if have[k] > 0:
            have[k] -= 1
        else:
            out.append((i, m))
    return out


def split_summary(text: str) -> tuple[str, dict[str, str]]:
    """A summary's own text, and what the pipeline appended to it (file lists, read-set ledger)."""
    s = text.lstrip()
    if s.startswith(_PREFIX):
        s = s[len(_PREFIX):].lstrip()
    appended: dict[str, str] = {}
    lists = "\n".join(m.group(0).strip() for m in _LISTS.finditer(s))
    if lists:
        appended["file_lists"] = lists
    s = _LISTS.sub("", s)
    ledger = "\n".join(m.group(0).strip() for m in _LEDGER.finditer(s))
    if ledger:
        appended["read_set"] = ledger
    s = _LEDGER.sub("", s)
    return s.strip(), appended


def head(text: str, budget: int, tok: Tokenizer) -> str:
    """The longest prefix of ``text`` within ``budget`` tokens."""
    return _longest(text, budget, tok, lambda n: text[:n])


def tail(text: str, budget: int, tok: Tokenizer) -> str:
    """The longest suffix of ``text`` within ``budget`` tokens."""
    return _longest(text, budget, tok, lambda n: text[len(text) - n:])


def _longest(text: str, budget: int, tok: Tokenizer, part: Callable[[int], str]) -> str:
    """``part(n)`` (``n`` characters of ``text``) for the largest ``n`` within ``budget``
    tokens, found by halving (token counts grow with the characters)."""
    if tok.count(text) <= budget:
        return text
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if tok.count(part(mid)) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return part(lo)


def probes_of(part: CompactionCut) -> list[Probe]:
    """Every kind's probes, each once: a value a heavier kind drew is not drawn again."""
    if not part.lost:
        return []
    kinds = sorted(PROBE_KINDS.values(), key=lambda k: -k.weight)
    seen: set[tuple[str, str]] = set()
    out: list[Probe] = []
    for k in kinds:
        for p in k.extract(part):
            key = " ".join(p.keys) if k.name in ("goal", "request", "constraint", "open_state", "failure") \
                else p.target.lower()
            if (k.name, key) in seen or ("value", p.target.lower()) in seen:
                continue
            seen.add((k.name, key))
            if k.name in ("continuation", "continuation_value", "file_modified", "identifier"):
                seen.add(("value", p.target.lower()))
            out.append(p)
    order = {k.name: n for n, k in enumerate(PROBE_KINDS.values())}
    return sorted(out, key=lambda p: (order[p.kind], p.message or 0))


def check(probes: Sequence[Probe], text: str) -> list[ProbeResult]:
    kinds = {k.name: k for k in PROBE_KINDS.values()}
    hay = Haystack(text)
    return [ProbeResult(p, kinds[p.kind].check(p, hay)) for p in probes]


def score_cut(
    part: CompactionCut,
    summary: str,
    *,
    tok: Tokenizer | None = None,
    budget: int = BUDGET,
    with_controls: bool = True,
    labels: tuple[str, str] = ("before", "after"),
    fmt: str = "",
    tokens: tuple[int, int] = (0, 0),
    messages_after: int = 0,
    pins: Sequence[str] = (),
    judge: Summarizer | None = None,
) -> ScoreReport:
    """Score ``summary`` (as written, the pipeline's lists still in it) on the cut ``part``."""
    tok = tok or get_tokenizer("heuristic")
    own, appended = split_summary(summary)
    probes = probes_of(part)
    # the input as a summarizer reads it: an earlier summary comes apart from the messages
    source = serialize([(i, m) for i, m in part.lost if not is_summary(m)])
    clipped = head(own, budget, tok)
    main = Scored("summary", tok.count(own), check(probes, clipped), false_claims(part, clipped),
                  quality.reject(own, source) if own else "the summary is empty")
    removed = sum(count_messages([m for _, m in part.lost], tok))
    pipeline = {k: tok.count(v) for k, v in appended.items()}
    if pins:
        pipeline["pins"] = sum(tok.count(p) for p in pins)
    rep = ScoreReport(labels[0], labels[1], fmt, tokens[0], tokens[1], removed, len(part.before), messages_after,
                      len(part.lost), budget, main, pipeline=pipeline)
    if with_controls:
        for name, text in controls(part.lost, lambda s: tail(s, budget, tok)).items():
            t = head(text, budget, tok)
            rep.controls.append(Scored(name, tok.count(t), check(probes, t), false_claims(part, t),
                                       quality.reject(t, source) if t else "the summary is empty"))
        assert [c.name for c in rep.controls] == list(CONTROLS)
        rep.curve = [(b, weighted(check(probes, head(own, b, tok)))) for b in CURVE if b < main.tokens]
        rep.curve.append((main.tokens, weighted(check(probes, own))))
    if judge is not None:
        # lazy: start-up (`ctxtool --help` would load ctxtool.score.judge)
        from .judge import judge_report

        rep.judge = judge_report(judge, probes, clipped)
    return rep


def score_totals(reps: Sequence[ScoreReport]) -> dict[str, Any]:
    """The totals of many scored transcripts. Retention is the mean over the transcripts that had
    something to probe; ``unprobed`` counts the others (they claim nothing either way)."""
    tb, ta = sum(r.tokens_before for r in reps), sum(r.tokens_after for r in reps)
    rs = [r.retention for r in reps if r.retention is not None]
    return {
        "transcripts": len(reps),
        "tokens_before": tb,
        "tokens_after": ta,
        "ratio": round(tb / ta, 3) if ta else None,
        "probes": sum(len(r.results) for r in reps),
        "lost": sum(len(r.lost) for r in reps),
        "false_claims": sum(len(r.claims) for r in reps),
        "unprobed": len(reps) - len(rs),
        "retention": round(sum(rs) / len(rs), 4) if rs else None,
    }


def split(before: Sequence[Message], after: Sequence[Message], future: Sequence[Message] = ()) -> CompactionCut:
    """The cut between two contexts: what ``after`` lost of ``before``, and what followed."""
    lost = lost_part(before, after)
    gone = {i for i, _ in lost}
    kept = [m for i, m in enumerate(before) if i not in gone]
    part = CompactionCut(lost, list(before), kept=Haystack("\n".join(text_of(m) for m in kept)))
    part.after = [*before[part.cut:], *future]
    return part


@dataclass(slots=True)
class Cut:
    """A compaction seen from outside: the part it removed (with what followed), the summary
    it wrote (as written), the messages it added that BEFORE does not hold (pins)."""

    part: CompactionCut
    summary: str
    pins: list[str]
    tokens: tuple[int, int]  # BEFORE's and AFTER's context tokens
    messages_after: int
    labels: tuple[str, str] = ("before", "after")
    format: str = ""
    previous: str = ""  # the summary BEFORE started from (an earlier compaction's)

    def score(self, summary: str | None = None, *, tok: Tokenizer | None = None, budget: int = BUDGET,
              with_controls: bool = True, judge: Summarizer | None = None) -> ScoreReport:
        """This cut scored with its own summary, or with ``summary`` in its place."""
        return score_cut(self.part, self.summary if summary is None else summary, tok=tok, budget=budget,
                         with_controls=with_controls, labels=self.labels, fmt=self.format, tokens=self.tokens,
                         messages_after=self.messages_after, pins=self.pins if summary is None else (),
                         judge=judge)


def cut_messages(
    before: Sequence[Message],
    after: Sequence[Message],
    *,
    after_summary: str = "",
    before_summary: str = "",
    future: Sequence[Message] = (),
    tok: Tokenizer | None = None,
    labels: tuple[str, str] = ("before", "after"),
    fmt: str = "",
) -> Cut:
    """The cut between two contexts given as messages (plus a compaction entry's summary text,
    which is in context without being a message). AFTER's summary messages are the summary;
    its other messages that BEFORE does not hold (pins) are reported, never credited."""
    tok = tok or get_tokenizer("heuristic")
    before, after = [m for m in before if m.agent_visible], [m for m in after if m.agent_visible]
    own = {_key(m) for m in before}
    summaries = [after_summary] if after_summary and after_summary != before_summary else []
    summaries += [text_of(m) for m in after if is_summary(m) and _key(m) not in own]
    pins = [text_of(m) for m in after if not is_summary(m) and _key(m) not in own]
    part = split(before, [m for m in after if not is_summary(m)], future)
    part.previous_summary = before_summary
    t_before = sum(count_messages(before, tok)) + (tok.count(before_summary) if before_summary else 0)
    t_after = sum(count_messages(after, tok)) + (tok.count(after_summary) if after_summary else 0)
    return Cut(part, "\n\n".join(summaries), pins, (t_before, t_after), len(after), labels, fmt, before_summary)


def cut(before: Transcript, after: Transcript, *, future: Sequence[Message] = (), tok: Tokenizer | None = None) -> Cut:
    """The cut of ``after`` (a compaction of ``before``): each transcript taken as the agent's
    context (:func:`ctxtool.tokens.context.view`: after its last compaction, with its summary)."""
    vb, va = view(before), view(after)
    return cut_messages(vb.context_messages, va.context_messages, after_summary=va.summary,
                        before_summary=vb.summary, future=future, tok=tok, labels=(before.label, after.label),
                        fmt=before.format)


def score_messages(before: Sequence[Message], after: Sequence[Message], *, after_summary: str = "",
                   before_summary: str = "", future: Sequence[Message] = (), tok: Tokenizer | None = None,
                   budget: int = BUDGET, with_controls: bool = True, labels: tuple[str, str] = ("before", "after"),
                   fmt: str = "", judge: Summarizer | None = None) -> ScoreReport:
    """Score two contexts given as messages (:func:`cut_messages`)."""
    c = cut_messages(before, after, after_summary=after_summary, before_summary=before_summary, future=future,
                     tok=tok, labels=labels, fmt=fmt)
    return c.score(tok=tok, budget=budget, with_controls=with_controls, judge=judge)


def score(before: Transcript, after: Transcript, *, tok: Tokenizer | None = None, budget: int = BUDGET,
          with_controls: bool = True, future: Sequence[Message] = (), judge: Summarizer | None = None) -> ScoreReport:
    """Score ``after`` (a compaction of ``before``) on its cut (:func:`cut`)."""
    return cut(before, after, future=future, tok=tok).score(tok=tok, budget=budget, with_controls=with_controls,
                                                            judge=judge)


def score_files(before: str | Path, after: str | Path, *, fmt: str | None = None, after_fmt: str | None = None,
                tok: Tokenizer | None = None, budget: int = BUDGET,
                judge: Summarizer | None = None) -> Iterator[ScoreReport]:
    """Score each transcript of ``after`` against the transcript of ``before`` at the same
    position (one session each, or two datasets of the same records). Two directories: each
    file of ``before`` against the file of ``after`` with the same relative path (its suffix
    aside: ``compact DIR -o OUT/ --to ...`` may change it)."""
    # lazy: start-up (loaded only when this runs: ..formats)
    from ..formats import read

    pairs = _tree_pairs(str(before), str(after))
    if pairs is not None:
        for b_file, a_file in pairs:
            yield from score_files(b_file, a_file, fmt=fmt, after_fmt=after_fmt, tok=tok, budget=budget, judge=judge)
        return
    bs = list(read(str(before), fmt))
    as_ = list(read(str(after), after_fmt))
    if len(bs) != len(as_):
        raise CtxtoolError(f"{before} holds {len(bs)} transcript(s) and {after} {len(as_)}: "
                           "score compares the transcripts of two files one to one", kind=Failure.USAGE)
    for b, a in zip(bs, as_, strict=True):
        yield score(b, a, tok=tok, budget=budget, judge=judge)


def _tree_pairs(before: str, after: str) -> list[tuple[str, str]] | None:
    """The files of two directories paired by relative path without its suffix (None: not two
    directories; one directory and one file, or a file on one side only, is an error)."""
    import os

    dirs = [p != "-" and os.path.isdir(p) for p in (before, after)]
    if not any(dirs):
        return None
    if not all(dirs):
        raise CtxtoolError("score compares a file with a file, or a directory with a directory (files paired by "
                           "their relative paths)", path=before if dirs[0] else after, kind=Failure.USAGE)
    # lazy: start-up (`ctxtool --help` would load ctxtool.formats.base)
    from ..run.engines.shards import tree_files

    def stem(rel: str) -> str:
        for c in (".gz", ".zst"):
            rel = rel.removesuffix(c)
        return os.path.splitext(rel)[0]

    after_files = {stem(rel): f for f, rel in tree_files(after)}
    pairs = []
    for f, rel in tree_files(before):
        a = after_files.pop(stem(rel), None)
        if a is None:
            raise CtxtoolError(f"{rel} has no counterpart in {after}", path=f, kind=Failure.USAGE)
        pairs.append((f, a))
    if after_files:
        raise CtxtoolError(f"{next(iter(after_files))} has no counterpart in {before}", path=after,
                           kind=Failure.USAGE)
    return pairs
