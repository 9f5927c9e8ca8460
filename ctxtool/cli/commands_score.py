"""score: what a compaction kept (probes from BEFORE checked against AFTER)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import CtxtoolError, Failure
from ..formats import FORMATS
from ..score.core import BUDGET, score_files, score_totals
from ..summarizers import SUMMARIZERS, Closeable
from ..tokens.count import get_tokenizer
from . import common, console
from .common import configured_model
from .render import JsonlOpt, emit

if TYPE_CHECKING:
    from ..score.core import ScoreReport


def score_cmd(
    before: Annotated[str, typer.Argument(help="The transcript before compaction (a file, - for stdin, or a directory of them).", show_default=False)],
    after: Annotated[str | None, typer.Argument(help="The same transcript after compaction (a directory: each file paired with BEFORE's of the same relative path). Not with --recorded.", show_default=False)] = None,
    fmt: common.FormatOpt = None,
    after_fmt: Annotated[str | None, common.registry_option("--after-format", registry=FORMATS, help="Format of AFTER (default: detected).")] = None,
    judge: Annotated[str | None, common.registry_option("--judge", registry=SUMMARIZERS, exclude=("heuristic",), what="judge", help="Also ask a model questions drawn from the probes, answered from AFTER only and graded against BEFORE.")] = None,
    judge_model: Annotated[str | None, typer.Option("--judge-model", help="The judge's model name.")] = None,
    base_url: Annotated[str | None, typer.Option("--base-url", help="Endpoint of the openai/anthropic judge.")] = None,
    command: Annotated[str | None, typer.Option("--command", help="Program for --judge command (stdin: prompt, stdout: answer).")] = None,
    timeout: Annotated[float | None, typer.Option("--timeout", help="Seconds per judge request (default 120).", min=1)] = None,
    max_lost: Annotated[int, typer.Option("--limit", help="How many lost probes to list per transcript (all with --json).", min=0)] = 20,
    budget: Annotated[int, typer.Option("--budget", help="Tokens of the summary scored: a longer summary is scored on its first BUDGET tokens, and so is each control.", min=1)] = BUDGET,
    recorded: Annotated[bool, typer.Option("--recorded", help="Score the compactions BEFORE's sessions recorded themselves (Claude Code compact_boundary, pi compaction, Codex compacted), each on the part it replaced, with what the session did next as continuation probes; no AFTER.")] = False,
    number: Annotated[int | None, typer.Option("--compaction", help="With --recorded: only the compaction of this number (as `ctxtool compactions` numbers them).", min=1)] = None,
    tokenizer: common.TokenizerOpt = None,
    model: common.ModelOpt = None,
    as_json: common.JsonOpt = False,
    as_jsonl: JsonlOpt = False,
) -> None:
    """Score the summary of a compaction (AFTER) on the part of BEFORE it removed, at a fixed
    budget, beside controls. Probes (the goal and requests, constraints, the open plan items,
    unresolved failures, modified files, what the agent used after the cut, identifiers) are
    drawn from the removed part by score's own rules and checked against the summary's first
    --budget tokens; file lists and pins the pipeline appends are reported, not credited. Prints
    the weighted retention, continuation recall, false claims about the task's state, the quality
    rules' verdict, and the same cut scored with no summary, a content-free summary, the removed
    part's identifiers and its tail verbatim. Deterministic and offline unless --judge is given."""
    # lazy: start-up (`ctxtool score` would load ctxtool.config)
    from ..config import Config

    if recorded and after is not None:
        raise CtxtoolError("score --recorded takes one path (the sessions), not AFTER", kind=Failure.USAGE)
    if not recorded and after is None:
        raise CtxtoolError("score needs AFTER (the transcript after compaction), or --recorded to score the "
                           "compactions BEFORE recorded itself", kind=Failure.USAGE)
    if number is not None and not recorded:
        raise CtxtoolError("--compaction N selects one of the compactions --recorded scores", kind=Failure.USAGE)
    if recorded and after_fmt is not None:
        raise CtxtoolError("--after-format names AFTER's format; score --recorded takes no AFTER", kind=Failure.USAGE)

    _, tok_name = configured_model(model, tokenizer)
    tok = get_tokenizer(tok_name)
    jm = None
    if judge is not None:
        # lazy: start-up (`ctxtool score` would load ctxtool.compaction)
        from ..compaction.settings import summarizer_from_config

        cfg = Config({"summarizer.kind": judge, "summarizer.model": judge_model, "summarizer.base_url": base_url,
                      "summarizer.command": command, "summarizer.timeout": timeout})
        if judge != "command" and not cfg["summarizer.model"]:
            raise CtxtoolError(f"--judge {judge} needs a model: pass --judge-model or set summarizer.model",
                               kind=Failure.USAGE)
        jm = summarizer_from_config(cfg, cache=False)
    try:
        if after is None:
            # lazy: start-up (loaded only when this runs: ..score.recorded)
            from ..score.recorded import score_recorded_files

            reports = score_recorded_files(before, fmt=fmt, tok=tok, budget=budget, judge=jm, number=number)
        else:
            reports = score_files(before, after, fmt=fmt, after_fmt=after_fmt, tok=tok, budget=budget, judge=jm)
        if as_json or as_jsonl:
            done: list[ScoreReport] = []

            def items() -> Any:
                for r in reports:
                    done.append(r)
                    yield r.to_json()

            emit("score", {"before_path": before, "after_path": after, "tokenizer": tok_name, "budget": budget,
                           "judge": judge},
                 items=items(), tail=lambda: {"totals": score_totals(done)}, jsonl=as_jsonl)
        else:
            _render(list(reports), console.PrintableStream(sys.stdout), max_lost)
    finally:
        if isinstance(jm, Closeable):
            jm.close()


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def _render(reps: list[ScoreReport], out: console.PrintableStream, max_lost: int) -> None:
    # lazy: start-up (`ctxtool --help` would load ctxtool.text.prose)
    from ..text.prose import one_line

    for r in reps:
        s = r.summary
        comp = f"{r.compression:.1f}x" if r.compression else "-"
        out.write(f"{common.short_label(r.before)} → {common.short_label(r.after)}: {r.tokens_before:,} → "
                  f"{r.tokens_after:,} {common.SINCE} (summary compression {comp}); {r.lost_messages:,} of "
                  f"{r.messages_before:,} messages summarized ({r.tokens_removed:,} tokens); summary {s.tokens:,} "
                  f"tokens, scored on its first {r.budget:,}\n")
        out.write(f"  retention {_pct(r.retention)} · continuation {_pct(r.continuation)} · {len(r.results):,} probes · "
                  f"{len(r.claims)} false claim(s) · quality rules: {s.quality or 'pass'}\n")
        if r.controls:
            m = r.margins()
            out.write("  controls: " + " · ".join(f"{c.name} {_pct(c.retention)}"
                                                   + (f" ({m[c.name]:+.1%})" if c.name in m else "")
                                                   for c in r.controls) + "\n")
        kinds = [k for k in r.kinds if k.probes]
        if kinds:
            out.write("  " + " · ".join(f"{k.kind} {k.kept}/{k.probes}" for k in kinds) + "\n")
        if r.pipeline:
            out.write("  not credited (added by the pipeline): "
                      + " · ".join(f"{k} {v:,} tokens" for k, v in r.pipeline.items()) + "\n")
        if r.judge is not None:
            out.write(f"  judge ({r.judge.backend}): {_pct(r.judge.score)} · "
                      + " · ".join(f"{a.category} {a.correct}/{a.probes}" for a in r.judge.answers) + "\n")
        for c in r.claims:
            out.write(f"  false claim ({c.kind}): {one_line(c.line, 120)!r}: {one_line(c.evidence, 120)}\n")
        lost = r.lost
        for p in lost[:max_lost]:
            note = f" ({p.note})" if p.note else ""
            out.write(f"  lost {p.kind}: {one_line(p.text, 160)}{note}\n")
        if len(lost) > max_lost:
            out.write(f"  ... and {len(lost) - max_lost:,} more lost (--limit, or --json for all)\n")
    if len(reps) > 1:
        t = score_totals(reps)
        out.write(f"{t['transcripts']:,} transcript(s): {t['tokens_before']:,} → {t['tokens_after']:,} tokens; "
                  f"{t['probes']:,} probes, {t['lost']:,} lost, {t['false_claims']:,} false claim(s); "
                  f"mean retention {_pct(t['retention'])}"
                  + (f" ({t['unprobed']:,} with nothing to probe, left out)" if t["unprobed"] else "") + "\n")
    out.flush()


def register(app: typer.Typer) -> None:
    app.command("score")(score_cmd)
