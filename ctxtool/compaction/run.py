"""Files: :func:`compact_file` runs a :class:`~ctxtool.compaction.op.CompactOp` through the one
runner and returns the file's :class:`CompactReport`. The input is never modified; the output is
written atomically after it was re-read and validated, or not at all; with ``on_error="skip"`` a
record that fails is written unchanged and reported."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..io import outputs
from ..io.events import EventLog
from ..io.paths import refuse_overwrite
from ..run.operation import event_log
from ..summarizers import Summarizer
from ..summarizers.heuristic import HeuristicSummarizer
from .op import CompactOp
from .report import CompactReport, RecordReport
from .settings import CompactOptions


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
    engine: Any = None,
    messages_column: str | None = None,
    hint: bool = False,
) -> CompactReport:
    """Compact every transcript of ``path`` and write them to ``output`` (``None``/``-``:
    stdout; not written on ``dry_run``). ``jobs``: transcripts compacted at once (threads:
    summary models wait on the network). ``engine``: run as shards
    (:class:`ctxtool.run.engines.Sharding`). ``messages_column``: a Parquet dataset's conversation
    column (:mod:`ctxtool.io.parquet`). ``hint``: a compacted transcript ends with a note
    naming the tools that read the cache (:func:`ctxtool.agent.tools.add_hint`)."""
    # lazy: start-up (loaded only when this runs: ..io.parquet_paths, ..run.runner)
    from ..io.parquet_paths import is_parquet_name
    from ..run.runner import run_file

    src = str(path)
    out = None if output is None else str(output)
    if dry_run:
        refuse_overwrite(src, out)  # the runner checks the outputs it writes
    summ: Summarizer = summarizer if summarizer is not None else HeuristicSummarizer()
    op = CompactOp(options or CompactOptions(), summ, dry_run, validate_output, progress, hint=hint)
    log = event_log(events)
    t0 = time.perf_counter()
    try:
        run = run_file(op, src, None if dry_run else (out or "-"), fmt=fmt, to=to, on_error=on_error, jobs=1,
                       events=log, threads=max(1, jobs), engine=engine,
                       messages_column=messages_column)
    except BaseException:
        if log is not None and log.path is not None and log.events:
            log.flush()  # what was done until the failure
        raise
    part = run.report
    return CompactReport(
        src, out, run.format or "", part.output_format, summ.name, dry_run,
        records=[o.report for o in part.outcomes], summaries=[o.summary for o in part.outcomes],
        seconds=time.perf_counter() - t0, cache_hits=part.cache_hits, cache_misses=part.cache_misses,
        jobs=max(1, jobs), bytes_before=run.file_bytes_before, bytes_after=run.file_bytes_after if is_parquet_name(src) else part.bytes_written, skipped=run.skipped,
    )


def compact_paths(paths: Sequence[str | Path], output_dir: str | Path, **kwargs: Any) -> list[CompactReport]:
    """Compact several files into ``output_dir`` (same file names)."""
    # lazy: start-up (loaded only when this runs: ..formats.walk)
    from ..formats.walk import iter_paths

    out = outputs.output_dir(output_dir)
    return [compact_file(p, out / Path(p).name, **kwargs) for p in iter_paths(paths)]
