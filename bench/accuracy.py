"""Token estimates against the input tokens the model recorded (``make bench``; alone:
``python -m bench.accuracy``; ``python -m bench.accuracy --write-ratios`` (``make token-ratios``)
learns the family ratios shipped in ``ctxtool/data/token_ratios.json``).

For every corpus session that records usage (Claude Code, Codex, pi), each usage turn's
context is estimated and set beside the recorded input tokens (input + cache read + cache
creation; OpenAI-style input including cached): median and 90th percentile of the absolute
relative error, and the share of turns within ±10 % (the target: at least 90 %).

Columns: each tokenizer from the file alone (``heuristic``, ``o200k_base``, ``cl100k_base``);
the heuristic plus the first turn's gap (turns 2 on); ``calibrated`` fitted on the odd usage
turns and measured on the even ones (``alternate``) and fitted on the first half and measured
on the later half (``half``: how an estimate is used going forward), held-back turns only,
with an overhead for each stretch between compactions; the family's ratios (learned with
this session left out); seed 000's usage-aware estimate (the previous turn's recorded usage
plus the heuristic count of what came since; turns after a compaction have none and are not
counted); ``default``, the estimate ``check`` makes by default, on every turn (nothing is
fitted: that usage-aware estimate, and the heuristic alone where no usage was recorded since
the last compaction); ``--tokenizer calibrated`` usage-aware (the fit's counts after the last
usage, the fit alone after a compaction) on held-back turns, for both splits; and the
calibrated estimate of the first turn after each compaction alone, fitted on every turn
before it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus"
SESSION_DIRS = ("claude_code", "codex", "pi")
RATIOS = ROOT / "ctxtool" / "data" / "token_ratios.json"
TARGET = ">= 90% of turns within ±10%"
COLUMNS = ("heuristic", "o200k_base", "cl100k_base", "heuristic+offset", "calibrated alternate", "calibrated half",
           "family (file left out)", "usage-aware heuristic", "default", "calibrated usage-aware alternate",
           "calibrated usage-aware half", "calibrated, first turn after a compaction")


def sessions(corpus: Path) -> list[tuple[str, Any]]:
    """(name, transcript) of every corpus session file (first transcript of each)."""
    from ctxtool import formats

    out = []
    for d in SESSION_DIRS:
        for p in sorted((corpus / d).glob("*.jsonl")):
            t = next(iter(formats.read(str(p))), None)
            if t is not None:
                out.append((f"{d}/{p.stem}", t))
    return out


def measure(named: list[tuple[str, Any]]) -> tuple[list[tuple[str, int, dict[str, Any]]], dict[str, Any], dict[str, Any]]:
    """Per session: its usage turns and each column's error figures; and each column's
    errors pooled over all sessions, and over the sessions not redacted."""
    from ctxtool.calibration.families import learn_families, pick
    from ctxtool.calibration.features import turn_samples
    from ctxtool.calibration.fit import ErrorStats

    rows: list[tuple[str, int, dict[str, Any]]] = []
    pooled: dict[str, tuple[list[float], list[float]]] = {c: ([], []) for c in COLUMNS}
    clear: dict[str, tuple[list[float], list[float]]] = {c: ([], []) for c in COLUMNS}
    for name, t in named:
        samples = turn_samples(t)
        if not samples:
            continue
        cols: dict[str, Any] = {}
        # the family ratios learned without this session: no session grades ratios it taught
        fam = learn_families([(n, x) for n, x in named if n != name])["families"]
        got = pick(fam, last_model_of(t), t.format)
        spec = got[1] if got else None
        for col, (est, rec) in columns(t, samples, spec).items():
            cols[col] = ErrorStats.of(est, rec)
            for into in (pooled, clear) if not redacted(t) else (pooled,):
                into[col][0].extend(est)
                into[col][1].extend(rec)
        rows.append((name + (" (redacted)" if redacted(t) else ""), len(samples), cols))
    return rows, _pooled(pooled), _pooled(clear)


def last_model_of(t: Any) -> str | None:
    from ctxtool.tokens.context import last_model

    return last_model(t)


def _pooled(p: dict[str, tuple[list[float], list[float]]]) -> dict[str, Any]:
    from ctxtool.calibration.fit import ErrorStats

    return {c: ErrorStats.of(e, r) for c, (e, r) in p.items()}


def columns(t: Any, samples: list[Any], family: dict[str, Any] | None) -> dict[str, tuple[list[float], list[float]]]:
    """Each column's estimates and the recorded figures they are judged against."""
    from ctxtool.calibration.accuracy import usage_anchored, usage_aware
    from ctxtool.calibration.features import context_rows, message_features
    from ctxtool.calibration.fit import Calibration, after_compaction, fit, heuristic_calibration, split
    from ctxtool.tokens.count import count_messages, get_tokenizer

    ys = [float(s.recorded) for s in samples]
    out: dict[str, tuple[list[float], list[float]]] = {}
    heur_counts: list[int] = []
    heur_alone: list[float] = []
    for name in ("heuristic", "o200k_base", "cl100k_base"):
        tok = get_tokenizer(name)
        counts = count_messages(t.messages, tok)
        est = [float((tok.count(s.summary) if s.summary else 0) + sum(counts[i] for i in s.context)) for s in samples]
        out[name] = (est, ys)
        if name == "heuristic":
            heur_counts, heur_alone = counts, est
            gap = ys[0] - est[0]
            out["heuristic+offset"] = ([e + gap for e in est[1:]], ys[1:])
    rows = context_rows(t, samples)
    segs = [s.segment for s in samples]
    # the fit starts from the family's ratios learned without this session
    prior = Calibration.from_spec(family) if family is not None else heuristic_calibration()
    for how in ("alternate", "half"):
        train, test = split(len(samples), how)
        if train and test:
            c = fit([rows[i] for i in train], [ys[i] for i in train], prior, segments=[segs[i] for i in train])
            out[f"calibrated {how}"] = ([c.predict(rows[i], segment=segs[i]) for i in test], [ys[i] for i in test])
            # --tokenizer calibrated where usage exists: the fit's counts after the last usage,
            # the fit alone after a compaction
            est = usage_aware(samples, [c.tokens(message_features(m)) for m in t.messages],
                                [c.predict(r, segment=g) for r, g in zip(rows, segs, strict=True)])
            out[f"calibrated usage-aware {how}"] = ([est[i] for i in test], [ys[i] for i in test])
    # the first turn after each compaction, fitted on every turn before it: where no usage was
    # recorded since, the calibrated estimate from characters alone, with the overhead of the
    # segment before
    out["calibrated, first turn after a compaction"] = after_compaction(samples, rows, prior)
    if family is not None:
        out["family (file left out)"] = ([prior.predict(r) for r in rows], ys)
    pairs = list(usage_anchored(samples, heur_counts))
    out["usage-aware heuristic"] = ([float(e) for e, _ in pairs], [ys[k] for _, k in pairs])
    # the default, as check makes it, on every turn (nothing fitted): the usage-aware estimate,
    # and where no usage was recorded since the last compaction the heuristic alone
    out["default"] = (usage_aware(samples, heur_counts, heur_alone), ys)
    return out


def cell(s: Any) -> str:
    if s is None or not s.turns:
        return "–"
    return f"{s.median:.1%} / {s.p90:.1%} / {s.within:.0%} ({s.turns})"


def table(rows: list[tuple[str, int, dict[str, Any]]], pooled: dict[str, Any], clear: dict[str, Any]) -> str:
    lines = ["cells: median / p90 / share within ±10% (turns measured) of |estimate − recorded| / recorded", "",
             "| session | usage turns | " + " | ".join(COLUMNS) + " |", "|---|---|" + "---|" * len(COLUMNS)]
    for name, n, cols in rows:
        lines.append(f"| {name} | {n} | " + " | ".join(cell(cols.get(c)) for c in COLUMNS) + " |")
    total = sum(n for _, n, _ in rows)
    lines.append(f"| ALL (turns pooled) | {total} | " + " | ".join(cell(pooled.get(c)) for c in COLUMNS) + " |")
    lines.append("| ALL but redacted sessions | " + str(sum(n for name, n, _ in rows if not name.endswith("(redacted)")))
                 + " | " + " | ".join(cell(clear.get(c)) for c in COLUMNS) + " |")
    return "\n".join(lines)


def redacted(t: Any) -> bool:
    """A session most of whose texts were replaced by redaction markers: its characters are
    not what the model saw (reported apart as well as pooled, never dropped)."""
    from ctxtool.calibration.features import redacted_share

    return redacted_share(t) > 0.5


def run(corpus: Path, row: Callable[[str, str, str, str, str], None]) -> None:
    """The bench rows (pooled figures) and the per-session table, printed."""
    if not corpus.is_dir():
        print("  (corpus absent: token accuracy skipped)")
        return
    rows, pooled, clear = measure(sessions(corpus))
    print(table(rows, pooled, clear))
    for what, figures in (("all sessions", pooled), ("sessions not redacted", clear)):
        base = figures["heuristic"]
        for col in ("calibrated alternate", "calibrated half", "family (file left out)", "usage-aware heuristic",
                    "default", "calibrated usage-aware alternate", "calibrated usage-aware half",
                    "calibrated, first turn after a compaction"):
            s = figures[col]
            if s.turns:
                met = "met" if s.within >= 0.9 else "not met"
                row(f"token estimate within ±10%, {col} (corpus {what}, turns not fitted on)",
                    f"{s.within:.0%} of {s.turns} turns", f"heuristic {base.within:.0%} of {base.turns}",
                    f"median error {s.median:.1%}, p90 {s.p90:.1%}: {met}", TARGET)


def write_ratios(corpus: Path, target: Path = RATIOS) -> dict[str, Any]:
    from ctxtool.calibration.families import learn_families

    data = learn_families(sessions(corpus))
    target.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return data


def main(argv: list[str]) -> int:
    corpus = Path(next((a for a in argv if not a.startswith("-")), CORPUS))
    if "--write-ratios" in argv:
        data = write_ratios(corpus)
        for fam, spec in data["families"].items():
            e = spec["error"]
            print(f"{fam}: {spec['turns']} turns from {len(spec['files'])} files; measured error "
                  f"median {e['median']}, p90 {e['p90']}, within ±10% {e['within_10']}")
        print(f"written: {RATIOS.relative_to(ROOT)}")
        return 0
    run(corpus, lambda *r: print("  " + " | ".join(r)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
