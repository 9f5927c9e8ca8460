"""What compaction keeps, on the long corpus sessions (``make bench``; alone: ``python -m bench.retention``).

For each session, at the default keep budget and at ``--keep-recent-tokens 2000``: tokens
before → after, compression, and retention (``ctxtool score``: overall and per probe kind)
of the heuristic summary and of the no-summary baseline (the same kept messages, the summary
dropped). Where a session holds the product's own compaction (Claude Code compact_boundary,
pi compaction, Codex compacted: ``ctxtool.score.recorded``), that summary is scored on the
probes of the part it replaced, beside ctxtool's heuristic on the same part.
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
KEEPS = (None, 2000)  # None: the default keep budget
TARGET = "retention >= 95% at >= 10x"


def _kinds() -> list[str]:
    from ctxtool.score import probe_kinds

    return [k.name for k in probe_kinds()]


SHORT = {"goal": "goal", "request": "req", "constraint": "cons", "file_modified": "fmod", "file_read": "fread",
         "failure": "fail", "identifier": "ident", "next_step": "next"}


def sessions(corpus: Path) -> list[Path]:
    return sorted(p for d in SESSION_DIRS for p in (corpus / d).glob("*.jsonl") if p.stat().st_size >= MIN_BYTES)


def _cells(rep: Any) -> list[str]:
    per = {k.kind: k for k in rep.kinds}
    out = []
    for name in _kinds():
        k = per[name]
        out.append("-" if not k.probes else f"{k.kept}/{k.probes}")
    return out


def _line(session: str, keep: str, variant: str, rep: Any) -> list[str]:
    ratio = f"{rep.ratio:.1f}x" if rep.ratio else "-"
    return [session, keep, variant, f"{rep.tokens_before:,} → {rep.tokens_after:,}", ratio, f"{rep.retention:.1%}",
            *_cells(rep)]


def _without_summary(before: Any, after: Any) -> Any:
    """The baseline: AFTER's kept messages, its summary dropped."""
    from ctxtool.context import is_summary, view
    from ctxtool.score import score_messages

    vb, va = view(before), view(after)
    kept = [m for m in va.context_messages if not is_summary(m)]
    return score_messages(vb.context_messages, kept, before_summary=vb.summary, labels=(before.label, after.label))


def _compacted(t: Any, keep: int | None) -> Any:
    from ctxtool.compaction import CompactOptions, compact_transcript
    from ctxtool.errors import CtxtoolError

    o = CompactOptions(force=True) if keep is None else CompactOptions(force=True, keep_recent_tokens=keep)
    try:
        out = compact_transcript(t, options=o)
    except CtxtoolError as e:
        return str(e.message)
    return out if out.report.status == "compacted" else out.report.reason


def table(corpus: Path = CORPUS, log: Callable[[str], None] = print) -> tuple[list[list[str]], dict[str, list[Any]]]:
    from ctxtool import formats
    from ctxtool.score import score
    from ctxtool.score.recorded import score_recorded

    rows: list[list[str]] = []
    found: dict[str, list[Any]] = {"heuristic": [], "baseline": [], "product": [], "heuristic_at_product": []}
    for path in sessions(corpus):
        t = next(iter(formats.read(str(path))))
        name = path.name if len(path.name) <= 40 else path.name[:37] + "..."
        for keep in KEEPS:
            ks = "default" if keep is None else f"{keep:,}"
            got = _compacted(t, keep)
            if isinstance(got, str):
                rows.append([name, ks, "heuristic", "-", "-", "-", *(["-"] * len(_kinds()))])
                log(f"  {name} keep {ks}: not compacted ({got})")
                continue
            h = score(t, got.transcript)
            b = _without_summary(t, got.transcript)
            found["heuristic"].append((keep, h))
            found["baseline"].append((keep, b))
            rows.append(_line(name, ks, "heuristic", h))
            rows.append(_line(name, ks, "no summary", b))
        for rec, p in score_recorded(t):
            if not p.results:
                continue
            n = rec.number
            found["product"].append((n, p))
            rows.append(_line(f"{name} @{n}", "product", f"{t.format} summary", p))
            got = _compacted(rec.before, 2000)
            if not isinstance(got, str):
                h = score(rec.before, got.transcript)
                found["heuristic_at_product"].append((n, h))
                rows.append(_line(f"{name} @{n}", "2,000", "heuristic", h))
    return rows, found


def render(rows: list[list[str]]) -> str:
    head = ["session", "keep", "summary", "tokens before → after", "compression", "retention",
            *(SHORT.get(k, k) for k in _kinds())]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def run(corpus: Path = CORPUS, row: Callable[..., None] | None = None) -> None:
    if not sessions(corpus):
        print("  (no corpus: retention table skipped)")
        return
    t0 = time.perf_counter()
    rows, found = table(corpus)
    print(render(rows), flush=True)
    print(f"  ({time.perf_counter() - t0:.1f} s; per kind: probes kept/drawn; retention = mean over kinds with probes)")
    if row is None:
        return
    for keep in KEEPS:
        hs = [r for k, r in found["heuristic"] if k == keep]
        bs = [r for k, r in found["baseline"] if k == keep]
        if not hs:
            continue
        ks = "default keep" if keep is None else f"keep {keep:,}"
        ratio = _mean([r.ratio or 0 for r in hs])
        row(f"retention, heuristic summary ({ks}, {len(hs)} sessions)",
            f"{_mean([r.retention for r in hs]):.1%} at {ratio:.1f}x",
            f"no summary {_mean([r.retention for r in bs]):.1%}",
            f"{_mean([r.retention for r in hs]) - _mean([r.retention for r in bs]):+.1%} over baseline", TARGET)
    if found["product"]:
        ps, hp = [r for _, r in found["product"]], [r for _, r in found["heuristic_at_product"]]
        row(f"retention at the products' own compactions ({len(ps)})", f"heuristic {_mean([r.retention for r in hp]):.1%}",
            f"product summaries {_mean([r.retention for r in ps]):.1%}",
            f"{_mean([r.retention for r in hp]) - _mean([r.retention for r in ps]):+.1%}", "above every product summary")


if __name__ == "__main__":
    run()
    sys.exit(0)
