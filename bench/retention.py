"""What compaction keeps, on the corpus (``make bench``; alone: ``python -m bench.retention``).

Two kinds of cut, each scored by ``ctxtool score`` (retention at the budget, continuation
recall, false claims, compression) for every summary and every control on the same cut:

* each compaction a session recorded (Claude Code compact_boundary, pi compaction, Codex
  compacted): the product's own summary, ctxtool's heuristic summary of exactly the part the
  product removed (with the previous summary the product had), and the controls; continuation
  probes come from what the session did next;
* each long session at ``--keep-recent-tokens 2000``: the heuristic summary through
  ``compact``, the baseline (a content-free summary through ``compact``: what the pipeline
  appends on its own, which the measure does not credit) and the controls.

Rows come out in whatever order the measure puts them; nothing is ranked by hand.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus"
SESSION_DIRS = ("claude_code", "codex", "pi")
MIN_BYTES = 100_000  # a "long" session
KEEP = 2000
MARGIN = 0.20  # every control at least this far below the best real summary


class ContentFree:
    """The baseline summarizer: the score's content-free control text, whatever the input."""

    name = "content-free"
    context_window = 10**12

    def summarize(self, req: Any) -> str:
        from ctxtool.score.controls import CONTENT_FREE

        return CONTENT_FREE

    def settings(self) -> dict[str, Any]:
        return {"kind": "content-free"}


def sessions(corpus: Path) -> list[Path]:
    return sorted(p for d in SESSION_DIRS for p in (corpus / d).glob("*.jsonl") if p.stat().st_size >= MIN_BYTES)


def heuristic_of(c: Any, t: Any = None) -> str:
    """ctxtool's heuristic summary of exactly the part a cut removed, as compaction writes it
    (the previous summary merged, paths relative to the session's directory, the file lists
    appended)."""
    from ctxtool.compaction.core import session_cwd
    from ctxtool.compaction.summarize import summarize
    from ctxtool.summarizers import prompt as sp
    from ctxtool.summarizers.heuristic import HeuristicSummarizer

    msgs = [m for _, m in c.part.lost]
    extra = {"cwd": session_cwd(t)} if t is not None else None
    text = summarize(HeuristicSummarizer(), msgs, c.previous or None, sp.PromptOptions(), extra).text
    return sp.with_file_lists(text, *sp.extract_files(msgs))


def _compacted(t: Any, summarizer: Any = None) -> Any:
    from ctxtool.compaction.core import compact_transcript
    from ctxtool.compaction.settings import CompactOptions
    from ctxtool.errors import CtxtoolError

    try:
        out = compact_transcript(t, summarizer, CompactOptions(force=True, keep_recent_tokens=KEEP))
    except CtxtoolError as e:
        return str(e.message)
    return out if out.report.status == "compacted" else out.report.reason


def _row(where: str, variant: str, rep: Any, s: Any) -> dict[str, Any]:
    return {"cut": where, "summary": variant, "retention": s.retention, "continuation": s.continuation,
            "false_claims": len(s.claims), "tokens": s.tokens,
            "compression": rep.tokens_removed / s.tokens if s.tokens else None, "quality": s.quality,
            "probes": len(rep.results), "claims": s.claims}


def _rows(where: str, reals: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    """The real summaries, then the controls (taken from the first report: the same cut)."""
    out = [_row(where, name, rep, rep.summary) for name, rep in reals]
    first = reals[0][1]
    out += [_row(where, f"control: {c.name}", first, c) for c in first.controls]
    return out


def table(corpus: Path = CORPUS, log: Callable[[str], None] = print, budget: int | None = None) -> list[dict[str, Any]]:
    """Every cut's rows: real summaries and controls."""
    from ctxtool import formats
    from ctxtool.score.core import BUDGET, cut
    from ctxtool.score.recorded import recorded

    b = budget or BUDGET
    rows: list[dict[str, Any]] = []
    for path in sessions(corpus):
        t = next(iter(formats.read(str(path))))
        name = path.name
        for rec in recorded(t):
            c = cut(rec.before, rec.after, future=rec.future)
            product = c.score(budget=b)
            if not product.results:
                log(f"  {name} @{rec.number}: no probes in the part it removed (redacted or empty text)")
                continue
            heur = c.score(heuristic_of(c, t), budget=b)
            rows += _rows(f"{name} @{rec.number} ({t.format} compaction)", [(f"{t.format} summary", product),
                                                                            ("heuristic", heur)])
        got = _compacted(t)
        if isinstance(got, str):
            log(f"  {name} keep {KEEP:,}: not compacted ({got})")
            continue
        base = _compacted(t, ContentFree())
        reals = [("heuristic", cut(t, got.transcript).score(budget=b))]
        if not reals[0][1].results:
            log(f"  {name} keep {KEEP:,}: no probes in the part it removed (redacted or empty text)")
            continue
        if not isinstance(base, str):
            reals.append(("baseline: content-free via compact", cut(t, base.transcript).score(budget=b)))
        rows += _rows(f"{name} keep {KEEP:,}", reals)
    return rows


def readme_rows(rows: list[dict[str, Any]]) -> list[str]:
    """The README's table: per recorded compaction, the product summary, the heuristic and the
    best control (retention, false claims)."""
    out = []
    for where in dict.fromkeys(r["cut"] for r in rows if "@" in r["cut"]):
        rs = [r for r in rows if r["cut"] == where]
        prod = next(r for r in rs if r["summary"].endswith(" summary"))
        heur = next(r for r in rs if r["summary"] == "heuristic")
        best = max((r for r in rs if r["summary"].startswith("control")), key=lambda r: r["retention"])
        out.append(f"| {where.split(' (')[0]} | {_pct(prod['retention'])}, {prod['false_claims']} false claim(s) | "
                   f"{_pct(heur['retention'])}, {heur['false_claims']} false claim(s) | "
                   f"{best['summary'].removeprefix('control: ')} {_pct(best['retention'])} |")
    return out


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def render(rows: list[dict[str, Any]]) -> str:
    head = ["cut", "summary", "retention", "continuation", "false claims", "tokens", "compression", "quality rules"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        comp = f"{r['compression']:.1f}x" if r["compression"] else "-"
        out.append("| " + " | ".join([r["cut"], r["summary"], _pct(r["retention"]), _pct(r["continuation"]),
                                       str(r["false_claims"]), f"{r['tokens']:,}", comp,
                                       "pass" if r["quality"] is None else "reject"]) + " |")
    return "\n".join(out)


def verdicts(rows: list[dict[str, Any]]) -> list[str]:
    """Per cut: the ranking, and the best real summary's margin over each control."""
    out = []
    for where in dict.fromkeys(r["cut"] for r in rows):
        rs = [r for r in rows if r["cut"] == where]
        reals = [r for r in rs if not r["summary"].startswith(("control", "baseline"))]
        ctrls = [r for r in rs if r["summary"].startswith(("control", "baseline"))]
        rank = " > ".join(f"{r['summary']} {_pct(r['retention'])}" for r in sorted(reals, key=lambda r: -r["retention"]))
        best = max(r["retention"] for r in reals)
        worst = min(best - r["retention"] for r in ctrls)
        out.append(f"{where}: {rank}; best real summary beats every control by {worst:+.1%} or more"
                   + ("" if worst >= MARGIN else f" (BELOW the {MARGIN:.0%} margin)"))
    return out


def run(corpus: Path = CORPUS, row: Callable[..., None] | None = None) -> None:
    if not sessions(corpus):
        print("  (no corpus: retention table skipped)")
        return
    t0 = time.perf_counter()
    rows = table(corpus)
    print(render(rows), flush=True)
    for v in verdicts(rows):
        print("  " + v)
    print("\n".join(readme_rows(rows)))
    print(f"  ({time.perf_counter() - t0:.1f} s; retention: weighted mean over the probe kinds at the first 3,000 "
          "summary tokens; compression: tokens removed per summary token)")
    for r in rows:
        for c in r["claims"][:3]:
            print(f"  false claim ({r['cut']}, {r['summary']}): {c.kind}: {c.line[:120]!r} — {c.evidence[:100]}")
    if row is None:
        return
    cuts = [c for c in dict.fromkeys(r["cut"] for r in rows)]
    for kind, pick in (("the products' compactions", lambda c: "@" in c), (f"keep {KEEP:,}", lambda c: "@" not in c)):
        for variant in ("heuristic", "product summary"):
            rs = [r for c in cuts if pick(c) for r in rows if r["cut"] == c
                  and (r["summary"] == variant or (variant == "product summary" and r["summary"].endswith(" summary")))]
            if not rs:
                continue
            ctrl = [max((r for r in rows if r["cut"] == x["cut"] and r["summary"].startswith(("control", "baseline"))),
                        key=lambda r: r["retention"]) for x in rs]
            row(f"retention at {kind}: {variant} ({len(rs)} cuts, budget 3,000)",
                f"{sum(r['retention'] for r in rs) / len(rs):.1%}",
                f"best control {sum(r['retention'] for r in ctrl) / len(ctrl):.1%}",
                f"continuation {_pct(sum(r['continuation'] or 0 for r in rs) / len(rs))}, "
                f"{sum(r['false_claims'] for r in rs)} false claim(s)", "every control >= 20 points below")


if __name__ == "__main__":
    run()
    sys.exit(0)
