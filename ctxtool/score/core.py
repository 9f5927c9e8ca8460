"""Score what a compaction kept: probes from the part of BEFORE that AFTER lost, checked
against AFTER; retention per kind and overall, and the compression ratio."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..context import view
from ..errors import CtxtoolError, ExitCode
from ..model import Message, Transcript
from ..tokens import Tokenizer, count_messages, get_tokenizer
from .probes import Part, Probe, probe_kinds
from .text import Haystack

if TYPE_CHECKING:
    from ..summarizers import Summarizer
    from .judge import JudgeReport


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
    probes: int
    kept: int

    @property
    def retention(self) -> float | None:
        return self.kept / self.probes if self.probes else None

    def to_json(self) -> dict[str, Any]:
        r = self.retention
        return {"kind": self.kind, "probes": self.probes, "kept": self.kept,
                "retention": None if r is None else round(r, 4)}


@dataclass(slots=True)
class ScoreReport:
    """What AFTER kept of BEFORE. ``retention`` is the mean of the kinds' retentions (each
    kind with probes counts once, so many identifiers do not outweigh one lost request);
    1.0 when AFTER lost nothing."""

    before: str
    after: str
    format: str
    tokens_before: int
    tokens_after: int
    messages_before: int
    messages_after: int
    lost_messages: int
    results: list[ProbeResult] = field(default_factory=list)
    judge: JudgeReport | None = None

    @property
    def kinds(self) -> list[KindScore]:
        out = []
        for k in probe_kinds():
            rs = [r for r in self.results if r.probe.kind == k.name]
            out.append(KindScore(k.name, len(rs), sum(1 for r in rs if r.kept)))
        return out

    @property
    def retention(self) -> float:
        rs = [k.retention for k in self.kinds if k.retention is not None]
        return sum(rs) / len(rs) if rs else 1.0

    @property
    def ratio(self) -> float | None:
        return self.tokens_before / self.tokens_after if self.tokens_after else None

    @property
    def lost(self) -> list[Probe]:
        return [r.probe for r in self.results if not r.kept]

    def to_json(self) -> dict[str, Any]:
        r = self.ratio
        return {
            "before": self.before,
            "after": self.after,
            "format": self.format,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "ratio": None if r is None else round(r, 3),
            "messages_before": self.messages_before,
            "messages_after": self.messages_after,
            "lost_messages": self.lost_messages,
            "probes": len(self.results),
            "kept": sum(1 for x in self.results if x.kept),
            "retention": round(self.retention, 4),
            "kinds": [k.to_json() for k in self.kinds],
            "lost": [x.to_json() for x in self.results if not x.kept],
            "judge": None if self.judge is None else self.judge.to_json(),
        }


def _key(m: Message) -> tuple[str, ...]:
    """A message's content: what 'AFTER holds it verbatim' compares."""
    return (m.role, *(f"call {b.name} {b.arguments_text()}" if b.type == "tool_call" else b.text
                      for b in m.content if b.type == "tool_call" or b.text))


def _texts(m: Message) -> Iterator[str]:
    for b in m.content:
        if b.type == "tool_call":
            yield f"{b.name} {b.arguments_text()}"
        elif b.text:
            yield b.text


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


def haystack(after: Sequence[Message], summary: str = "") -> Haystack:
    """AFTER as the probes see it: every text, tool call and result of its context."""
    return Haystack.of([summary, *(t for m in after for t in _texts(m))])


def probes_of(before: Sequence[Message], lost: list[tuple[int, Message]]) -> list[Probe]:
    part = Part.of(lost, list(before))
    return [p for k in probe_kinds() for p in k.extract(part)]


def check(probes: Sequence[Probe], hay: Haystack) -> list[ProbeResult]:
    kinds = {k.name: k for k in probe_kinds()}
    return [ProbeResult(p, kinds[p.kind].check(p, hay)) for p in probes]


def score_messages(
    before: Sequence[Message],
    after: Sequence[Message],
    *,
    after_summary: str = "",
    before_summary: str = "",
    tok: Tokenizer | None = None,
    labels: tuple[str, str] = ("before", "after"),
    fmt: str = "",
    judge: Summarizer | None = None,
) -> ScoreReport:
    """Score two contexts given as messages (plus a compaction entry's summary text, which
    is in context without being a message)."""
    tok = tok or get_tokenizer("heuristic")
    before, after = [m for m in before if m.agent_visible], [m for m in after if m.agent_visible]
    lost = lost_part(before, after)
    hay = haystack(after, after_summary)
    results = check(probes_of(before, lost), hay)
    t_before = sum(count_messages(before, tok)) + (tok.count(before_summary) if before_summary else 0)
    t_after = sum(count_messages(after, tok)) + (tok.count(after_summary) if after_summary else 0)
    rep = ScoreReport(labels[0], labels[1], fmt, t_before, t_after, len(before), len(after), len(lost), results)
    if judge is not None:
        from .judge import judge_report

        rep.judge = judge_report(judge, [r.probe for r in results], hay.text)
    return rep


def score(before: Transcript, after: Transcript, *, tok: Tokenizer | None = None,
          judge: Summarizer | None = None) -> ScoreReport:
    """Score ``after`` (a compaction of ``before``): each transcript is taken as the agent's
    context (:func:`ctxtool.context.view`: after its last compaction, with its summary)."""
    vb, va = view(before), view(after)
    return score_messages(vb.context_messages, va.context_messages, after_summary=va.summary,
                          before_summary=vb.summary, tok=tok, labels=(before.label, after.label),
                          fmt=before.format, judge=judge)


def score_files(before: str | Path, after: str | Path, *, fmt: str | None = None, after_fmt: str | None = None,
                tok: Tokenizer | None = None, judge: Summarizer | None = None) -> Iterator[ScoreReport]:
    """Score each transcript of ``after`` against the transcript of ``before`` at the same
    position (one session each, or two datasets of the same records)."""
    from ..formats import read

    bs = list(read(str(before), fmt))
    as_ = list(read(str(after), after_fmt))
    if len(bs) != len(as_):
        raise CtxtoolError(f"{before} holds {len(bs)} transcript(s) and {after} {len(as_)}: "
                           "score compares the transcripts of two files one to one", code=ExitCode.USAGE)
    for b, a in zip(bs, as_, strict=True):
        yield score(b, a, tok=tok, judge=judge)
