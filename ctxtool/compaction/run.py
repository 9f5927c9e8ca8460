"""Files: read every transcript, compact each (in parallel threads), validate, write atomically.

The input is never modified; the output is written atomically after it was re-read and
validated, or not at all. Validation rejects only problems the compaction introduced: an
input record that already ends in an unanswered tool call is compacted and written with it.
With ``on_error="skip"`` a record that fails (its summary, or the validation of its output)
is written unchanged and reported, and unreadable records are reported as skipped.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..errors import CtxtoolError, ExitCode
from ..events import EventLog
from ..formats.base import Format
from ..model import Transcript
from ..paths import refuse_overwrite
from ..summarizers import CacheCounts, Summarizer
from ..tokens import get_tokenizer
from . import pins
from .core import Outcome, compact_transcript
from .report import CompactReport, RecordReport
from .settings import CompactOptions


def _cache_counts(summarizer: Summarizer) -> tuple[int, int]:
    return (summarizer.hits, summarizer.misses) if isinstance(summarizer, CacheCounts) else (0, 0)


def failed(t: Transcript, e: CtxtoolError) -> Outcome:
    """The outcome of a transcript that could not be compacted: itself, unchanged, reported."""
    if e.path is None:
        e.path = t.path
    if e.line is None:
        e.line = t.lineno if t.record is not None else None
    rep = RecordReport(t.label, t.index, t.id, status="error", format=t.format, error=e.message,
                       messages_before=len(t.messages), messages_after=len(t.messages))
    return Outcome(t, rep, [("compaction_end", {"transcript": t.label, "error": e.message})])


def compact_file(
    path: str | Path,
    output: str | Path | None = None,
    *,
    fmt: str | None = None,
    to: str | None = None,
    options: CompactOptions | None = None,
    summarizer: Summarizer | None = None,
    jobs: int = 1,
    on_error: str = "fail",
    events: str | Path | EventLog | None = None,
    dry_run: bool = False,
    progress: Callable[[int, int, RecordReport], None] | None = None,
    validate_output: bool = True,
) -> CompactReport:
    """Compact every transcript of ``path`` and write them to ``output`` (``None``/``-``:
    stdout; not written on ``dry_run``)."""
    from .. import formats
    from ..formats.base import ErrorPolicy
    from ..summarizers.heuristic import HeuristicSummarizer

    opts = options or CompactOptions()
    src = str(path)
    out = None if output is None else str(output)
    refuse_overwrite(src, out)
    summ: Summarizer = summarizer if summarizer is not None else HeuristicSummarizer()
    t0 = time.perf_counter()
    policy = ErrorPolicy(on_error)
    ts = list(formats.read(src, fmt, policy))
    skipped = [str(e) for e in policy.skipped]
    if not ts:
        raise CtxtoolError("no transcripts in the input" + (f" ({len(skipped)} unreadable record(s) skipped)"
                                                            if skipped else ""), path=src)
    target = formats.get_format(to or ts[0].format)
    report = CompactReport(src, out, ts[0].format, target.name, summ.name, dry_run, jobs=max(1, jobs), skipped=skipped)
    if src != "-":
        report.bytes_before = os.path.getsize(src)
    h0, m0 = _cache_counts(summ)
    tok = get_tokenizer(opts.tokenizer)
    results: list[Outcome | None] = [None] * len(ts)
    errors: list[tuple[int, CtxtoolError]] = []
    done = [0]
    lock = threading.Lock()

    def work(i: int) -> None:
        t = ts[i]
        try:
            o = compact_transcript(t, summ, opts, dry_run=dry_run, tok=tok, out_format=target.name)
        except CtxtoolError as e:
            o = failed(t, e)
            with lock:
                errors.append((i, e))
        results[i] = o
        with lock:
            done[0] += 1
            n = done[0]
        if progress is not None:
            progress(n, len(ts), o.report)

    try:
        _run(work, len(ts), jobs, lambda: bool(errors) and on_error != "skip")
        if errors and on_error != "skip":
            raise min(errors, key=lambda x: x[0])[1]
    except BaseException:
        _emit(events, results)
        raise
    final = [o for o in results if o is not None]
    try:
        if not dry_run:  # a record whose output is rejected under skip gets the outcome of a failure
            report.bytes_after = write_validated(final, ts, out, target, validate_output, skip=on_error == "skip")
    finally:
        _emit(events, final)
    report.records = [o.report for o in final]
    report.summaries = [o.summary for o in final]
    h1, m1 = _cache_counts(summ)
    report.cache_hits, report.cache_misses = h1 - h0, m1 - m0
    report.seconds = time.perf_counter() - t0
    return report


def _run(work: Callable[[int], None], n: int, jobs: int, stop: Callable[[], bool]) -> None:
    if jobs <= 1 or n == 1:
        for i in range(n):
            work(i)
            if stop():
                return
        return
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futs = [pool.submit(work, i) for i in range(n)]
        for f in futs:
            f.result()
            if stop():
                for g in futs:
                    g.cancel()
                return


def _emit(events: str | Path | EventLog | None, results: Sequence[Outcome | None]) -> None:
    log = events if isinstance(events, EventLog) else (EventLog(events) if events is not None else None)
    if log is None:
        return
    for o in results:
        if o is not None:
            for kind, fields in o.events:
                log.emit(kind, **fields)
    if not isinstance(events, EventLog):
        log.flush()


class _Rejected(Exception):
    def __init__(self, problems: dict[int, CtxtoolError]) -> None:
        super().__init__(f"{len(problems)} output(s) rejected")
        self.problems = problems


def write_validated(outcomes: list[Outcome], old_ts: list[Transcript], output: str | None, target: Format,
                    validate_output: bool = True, *, skip: bool = False) -> int:
    """Render to a temporary file, re-read and validate it (schema for canonical files,
    structure for all: no orphan or unanswered call the input did not have), then move it
    into place. With ``skip`` a transcript whose output fails is written unchanged instead
    (its outcome becomes an error); otherwise nothing is written."""
    try:
        return _write(outcomes, old_ts, output, target, validate_output, reject=skip)
    except _Rejected as r:
        for i, e in r.problems.items():
            outcomes[i] = failed(old_ts[i], e)
        return _write(outcomes, old_ts, output, target, validate_output, reject=False)


def _write(outcomes: list[Outcome], old_ts: list[Transcript], output: str | None, target: Format,
           validate_output: bool, *, reject: bool) -> int:
    from .. import formats
    from ..jsonio import atomic_output

    new_ts = [o.transcript for o in outcomes]
    size = 0

    def check(tmp: str) -> None:
        nonlocal size
        bad = validate_written(tmp, target, new_ts, old_ts) if validate_output else {}
        if bad and reject:
            raise _Rejected(bad)
        if bad:
            first = bad[min(bad)]
            first.message += "; nothing written"
            raise first
        size = os.path.getsize(tmp)

    with atomic_output(output, check) as fh:
        formats.write(new_ts, fh, target)
    return size


def introduced(before: Sequence[tuple[str, str]], after: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The problems of ``after`` the input did not have. Problems are matched by code: a
    compaction renumbers positional call ids, so the same unanswered call can change its name."""
    left = Counter(code for code, _ in before)
    out = []
    for code, text in after:
        if left[code] > 0:
            left[code] -= 1
        else:
            out.append((code, text))
    return out


def validate_written(tmp: str, target: Format, new_ts: list[Transcript], old_ts: list[Transcript]) -> dict[int, CtxtoolError]:
    """The transcripts (by index) whose written output has a problem the compaction introduced."""
    from .. import formats
    from ..formats.base import ErrorPolicy
    from ..validate import check_messages, validate_canonical_file

    if target.name == "ctxtool":
        probs = validate_canonical_file(tmp)
        if probs:
            raise CtxtoolError(f"compacted output fails the schema: {probs[0].message}", code=ExitCode.ERROR)
    policy = ErrorPolicy("skip")
    back = list(formats.read(tmp, target, policy))
    if policy.skipped:
        raise CtxtoolError(f"compacted output does not read back: {policy.skipped[0].message}", code=ExitCode.ERROR)
    if len(back) != len(new_ts):
        raise CtxtoolError(f"compacted output reads back as {len(back)} transcripts, expected {len(new_ts)}", code=ExitCode.ERROR)
    bad: dict[int, CtxtoolError] = {}
    for i, (b, old) in enumerate(zip(back, old_ts, strict=True)):
        before = [(p.code, p.message) for p in check_messages(old.messages)]
        new = introduced(before, [(p.code, p.message) for p in check_messages(b.messages, b.path, b.label)])
        if lost := pins.missing(pins.recorded(new_ts[i]), b):
            bad[i] = pins.error(lost, old.path)
        elif new:
            code, text = new[0]
            bad[i] = CtxtoolError(f"compacted output would be invalid: {code}: {text} (transcript {old.label})",
                                  code=ExitCode.ERROR, path=old.path, line=old.lineno if old.record is not None else None)
    return bad


def compact_paths(paths: Sequence[str | Path], output_dir: str | Path, **kwargs: Any) -> list[CompactReport]:
    """Compact several files into ``output_dir`` (same file names)."""
    from .. import formats

    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    return [compact_file(p, out / Path(p).name, **kwargs) for p in formats.iter_paths(paths)]
