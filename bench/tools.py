"""Tool-output benchmarks: truncate throughput against stats (same run), memory, savings per corpus file."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _versus_stats(path: Path, where: str, base: Path, row: Callable[..., None], label: str = "") -> float:
    """truncate against stats over ``path``, whole processes, interleaved; returns truncate's median time."""
    import statistics

    from bench.common import CTXTOOL, REPEAT, ratios_of, run_process, spread

    mb = path.stat().st_size / 1e6
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory(dir=base) as work:
        st: list[float] = []
        tr: list[float] = []
        for k in range(REPEAT):
            os.sync()
            st.append(run_process([*CTXTOOL, "stats", str(path)]))
            d = Path(work) / str(k)
            os.sync()
            tr.append(run_process([*CTXTOOL, "truncate", "--preset", "head-tail", "--cache-dir", str(d / "cache"),
                                   "-o", str(d / "out.jsonl"), str(path)]))
        objs = sum(len(files) for _, _, files in os.walk(d / "cache"))
    ratios = ratios_of(st, tr)
    t_med, s_med = statistics.median(tr), statistics.median(st)
    row(
        f"truncate --preset head-tail ({cores} processes, writing to {where})" + (f" [{label}]" if label else ""),
        f"{mb / t_med:.0f} MB/s ({t_med:.2f} s, {objs:,} cache files)",
        f"stats {mb / s_med:.0f} MB/s ({s_med:.2f} s)",
        spread(ratios) + " of stats' speed",
        ">= 0.50x",
    )
    return t_med


#: the floors of bench/floors.py the truncate row is set against: (name, what the row says it does). Neither
#: shares code with ctxtool: the standard library, orjson and zstandard, a plain head/tail cut of the same limits
FLOORS = (
    ("truncate", "floor (no ctxtool code): parse, count and cut each tool output (plain head/tail cut, the preset's "
     "limits), sha256 each original cut, zstd each new one; no output"),
    ("truncate_write", "floor with the writes (no ctxtool code): the same, each changed record re-encoded in its "
     "source's separators (json.dumps), the others copied, the originals in a pack, an index line per cut"),
)


def _floor(path: Path, row: Callable[..., None], label: str = "", name: str = "truncate") -> float:
    """The truncate row's floors (bench/floors.py, independent of ctxtool): the work any truncate
    must do, as a whole process, against stats over the same file, interleaved; ``truncate_write``
    with the writes (issue 37). Returns the floor's median time."""
    import shutil
    import statistics

    from bench.common import CTXTOOL, REPEAT, ROOT, ratios_of, run_process, spread

    shm = Path("/dev/shm")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    st: list[float] = []
    fl: list[float] = []
    with tempfile.TemporaryDirectory(dir=shm if shm.is_dir() and os.access(shm, os.W_OK) else None) as work:

        def floor() -> float:  # its output removed after it, untimed (as truncate's)
            out = Path(work) / "out"
            out.mkdir()
            try:
                return run_process([sys.executable, "-m", "bench.floors", name, str(path), str(out)], env=env)
            finally:
                shutil.rmtree(out)

        floor()  # warm the page cache once
        for _ in range(REPEAT):  # interleaved
            st.append(run_process([*CTXTOOL, "stats", str(path)]))
            fl.append(floor())
    ratios = ratios_of(st, fl)
    row(
        dict(FLOORS)[name] + (f" [{label}]" if label else ""),
        f"{statistics.median(fl):.2f} s",
        f"stats {statistics.median(st):.2f} s",
        spread(ratios) + " of stats' speed",
        "(the best the truncate row can read)",
    )
    return statistics.median(fl)


#: truncate's phases in the profile of :func:`_profile`: (what, whether the floor with the writes does that work
#: too, the frames that mark it: (module path suffix, function[, text of the line it is at])). A sample goes to the
#: first phase, in this order, that a frame of its stack marks (the stash's zstd is the stash's; the encoder's
#: work, orjson's or json.dumps', is not the record's rebuild); one that none marks to "the rest".
PHASES: tuple[tuple[str, str, tuple[tuple[str, ...], ...]], ...] = (
    ("the stash of each changed message: build, JSON, sha256, zstd, manifest (apply_changes, flush_stashes)", "no",
     (("ctxtool/tool_outputs/stash.py", "apply_changes"), ("ctxtool/tool_outputs/stash.py", "flush_stashes"))),
    ("decode each record into the transcript model", "no", (("ctxtool/formats/base.py", "line_record"),)),
    ("cut each output (truncate_text)", "yes", (("ctxtool/tool_outputs/algorithms.py", "truncate_text"),)),
    ("zstd of each original", "yes", (("ctxtool/cache/content.py", "compress"),)),
    ("store each original: the pack, the manifest line, the check of refs/ (put_output, less zstd)",
     "its pack, not the manifest", (("ctxtool/tool_outputs/common.py", "put_output"),)),
    ("encode each changed record's messages in its source's style (ctxtool.io.jsontext.encode: orjson where its "
     "text is the standard library's, else json.dumps)", "yes",
     (("json/encoder.py", "encode"), ("json/encoder.py", "iterencode"), ("ctxtool/io/jsontext.py", "encode"))),
    ("rebuild each changed record from the model: render, the splice's checks (changed_record, less the encode)", "no",
     (("ctxtool/formats/base.py", "changed_record"),)),
    ("read the lines and parse them (orjson)", "yes", (("ctxtool/io/jsonl.py", "lines"),)),
    ("write the output (its write calls)", "yes", (("ctxtool/io/outputs.py", "write"),)),
    ("sha256 of each original", "yes", (("ctxtool/tool_outputs/truncate.py", "truncate", "sha256"),)),
)
SAMPLE_EVERY = 0.001  # seconds of this process's cpu between two samples


class _Sampler:
    """A sampling profiler of this process's main thread, on its cpu time (``ITIMER_PROF``: the
    other processes' load does not count): every :data:`SAMPLE_EVERY` seconds of cpu, the stack
    goes to a phase of :data:`PHASES` (a C call's time goes to the Python line that made it).
    No per-call cost, unlike cProfile's, which inflates the phases made of many small calls."""

    def __init__(self) -> None:
        import collections

        self.counts: collections.Counter[str] = collections.Counter()

    def __enter__(self) -> _Sampler:
        import signal

        self._old = signal.signal(signal.SIGPROF, self._sample)
        signal.setitimer(signal.ITIMER_PROF, SAMPLE_EVERY, SAMPLE_EVERY)
        return self

    def __exit__(self, *exc: object) -> None:
        import signal

        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        signal.signal(signal.SIGPROF, self._old)

    def _sample(self, signum: int, frame: Any) -> None:
        import linecache

        stack = []
        while frame is not None:
            stack.append(frame)
            frame = frame.f_back
        for what, _, marks in PHASES:
            for f in stack:
                code = f.f_code
                for m in marks:
                    if code.co_name == m[1] and code.co_filename.endswith(m[0]) and (
                            len(m) < 3 or m[2] in linecache.getline(code.co_filename, f.f_lineno or 0)):
                        self.counts[what] += 1
                        return
        self.counts[""] += 1


def _profile(path: Path, row: Callable[..., None], label: str = "", floor: float | None = None,
             whole: float | None = None) -> None:
    """Where truncate's time goes (issue 37), measured here: one process (-j 1) on ``path``,
    writing to /dev/shm where it exists, sampled on its cpu time (:class:`_Sampler`), its time
    split into the phases of :data:`PHASES`, each marked with whether the independent floor with
    the writes (bench/floors.py) does that work too, the rest last; then a pooled run (one process
    per core) in this process, its parent's join of the workers' parts timed. ``floor``/``whole``:
    the floor with the writes' and truncate's whole-process medians of this run."""
    import signal
    import time

    from ctxtool.run import parallel
    from ctxtool.tool_outputs import algorithms as toolout
    from ctxtool.tool_outputs import files as tools_ops

    on = f" [{label}]" if label else ""
    if not hasattr(signal, "setitimer"):  # pragma: no cover (no SIGPROF: Windows)
        print(f"  (no cpu timer signal here: no profile of truncate{on})")
        return
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else None

    def truncate(d: str, jobs: int | None = 1) -> None:
        tools_ops.truncate_file(str(path), str(Path(d) / "o.jsonl"), limits=toolout.PRESETS.get("head-tail"),
                                cache=Path(d) / "c", jobs=jobs)

    with tempfile.TemporaryDirectory(dir=base) as d:
        truncate(d)  # warm: imports, page cache
    with tempfile.TemporaryDirectory(dir=base) as d, _Sampler() as sampler:
        t0 = time.process_time()
        truncate(d)
        cpu = time.process_time() - t0
    n = sum(sampler.counts.values()) or 1
    beyond = 0.0  # the phases the floor does none of
    rest = "the rest (the run's loop, counting, notices, the report)"
    for what, in_floor, _ in (*PHASES, (rest, "no", ())):
        share = sampler.counts["" if what == rest else what] / n
        beyond += share if in_floor == "no" else 0
        row(f"  truncate -j 1 profile{on}: {what}", f"{share * cpu:.2f} s", f"of {cpu:.2f} s cpu ({n:,} samples)",
            f"{100 * share:.0f}%", f"(in the floor: {in_floor})")
    joined: list[float] = []
    join = parallel._join

    def timed_join(parts: list[str], out: Any) -> None:
        t1 = time.perf_counter()
        join(parts, out)
        joined.append(time.perf_counter() - t1)

    parallel._join = timed_join  # timed, not changed
    try:
        with tempfile.TemporaryDirectory(dir=base) as d:
            t0 = time.perf_counter()
            truncate(d, None)
            pooled = time.perf_counter() - t0
    finally:
        parallel._join = join
    row(f"  truncate pooled{on}: the parent's join of the workers' parts (one output file)", f"{sum(joined):.2f} s",
        f"of {pooled:.2f} s (wall, {os.cpu_count() or 1} processes)", f"{100 * sum(joined) / pooled:.0f}%",
        "(in the floor: no, one part a process)")
    if floor and whole:
        row(f"truncate's time beyond the floor with the writes{on}", f"truncate {whole:.2f} s",
            f"floor with the writes {floor:.2f} s", f"{whole / floor:.2f}x the floor's time",
            f"(profile: {100 * beyond:.0f}% in work the floor does not do)")


def _cut_versus_floor(path: Path, row: Callable[..., None], label: str = "") -> None:
    """The cut alone, in this process (issue 37): ctxtool's ``truncate_text`` with the ``head-tail``
    preset against the floor's plain cut of the same limits (bench/floors.py ``_cut``, no ctxtool
    code), over the same tool outputs (what the floors read: each ``tool`` message's text),
    interleaved, cpu time. The cut is truncate's largest phase that the floor does too: this row
    says whether truncate does it at the floor's cost (the floor's cut also encodes each original
    it cuts to bytes, which truncate does after its cut, to hash it: the row favours ctxtool by that)."""
    import statistics
    import time

    import orjson

    from bench.common import REPEAT, ratios_of, spread
    from bench.floors import _cut
    from ctxtool.tool_outputs import algorithms as toolout

    limits = toolout.PRESETS.get("head-tail")
    texts = []
    with open(path, "rb") as fh:
        for line in fh:
            for m in orjson.loads(line).get("messages") or ():
                if m.get("role") == "tool" and isinstance(m.get("content"), str):
                    texts.append(m["content"])
    ours: list[float] = []
    floor: list[float] = []
    cut = sum(toolout.truncate_text(x, limits).changed for x in texts)  # warm, and counted
    floor_cut = sum(_cut(x) is not None for x in texts)
    for _ in range(REPEAT):
        t0 = time.process_time()
        for x in texts:
            _cut(x)
        floor.append(time.process_time() - t0)
        t0 = time.process_time()
        for x in texts:
            toolout.truncate_text(x, limits)
        ours.append(time.process_time() - t0)
    row(f"the cut alone, in-process: truncate_text against the floor's plain cut [{label}]",
        f"{statistics.median(ours):.2f} s cpu ({len(texts):,} outputs, {cut:,} cut)",
        f"floor's cut {statistics.median(floor):.2f} s ({floor_cut:,} cut)",
        spread(ratios_of(floor, ours)) + " of the floor's speed", "(report: 1.00x is the floor's cost)")


def _in_process(path: Path, row: Callable[..., None], label: str = "") -> None:
    """truncate and stats in this process without the profiler (-j 1, interleaved)."""
    import statistics
    import time

    from bench.common import REPEAT, ratios_of, spread
    from ctxtool.stats import files as stats
    from ctxtool.tool_outputs import algorithms as toolout
    from ctxtool.tool_outputs import files as tools_ops

    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else None

    def truncate() -> None:
        with tempfile.TemporaryDirectory(dir=base) as d:
            tools_ops.truncate_file(str(path), str(Path(d) / "o.jsonl"), limits=toolout.PRESETS.get("head-tail"),
                                    cache=Path(d) / "c", jobs=1)

    st: list[float] = []
    tr: list[float] = []
    stats.stats_files([str(path)], workers=1)
    truncate()
    for _ in range(REPEAT):
        t0 = time.perf_counter()
        stats.stats_files([str(path)], workers=1)
        st.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        truncate()
        tr.append(time.perf_counter() - t0)
    row(f"truncate -j 1 in-process, no profiler [{label}]", f"{statistics.median(tr):.2f} s",
        f"stats -j 1 in-process {statistics.median(st):.2f} s", spread(ratios_of(st, tr)) + " of stats' speed",
        "(report: the whole-process row has the target)")


def run(big: Path, row: Callable[..., None], corpus: Path, sessions: Path | None = None) -> None:
    # Both as the command runs them, whole processes (a dataset file: one process per core),
    # interleaved. stats only reads (from the page cache); truncate also writes the output and
    # the cache objects. Where /dev/shm exists the first row writes there, so both run at
    # memory speed and the figure is the code's; the second row writes beside the input, on
    # this machine's disk (synced before each timing), whose small-file writes vary from one
    # run to the next. ``sessions`` (real sessions, bench/gen.py from_corpus): the first row
    # again on them.
    from bench.common import peak_rss_mb
    from bench.gen import generate
    from ctxtool.tool_outputs import algorithms as toolout
    from ctxtool.tool_outputs import files as tools_ops

    mb = big.stat().st_size / 1e6
    shm = Path("/dev/shm")
    places = [("memory, /dev/shm", shm)] if shm.is_dir() and os.access(shm, os.W_OK) else []
    places.append(("disk", big.parent))
    floors = {name: _floor(big, row, name=name) for name, _ in FLOORS}
    whole = [_versus_stats(big, where, base, row) for where, base in places]
    _profile(big, row, f"{mb:.0f} MB", floors["truncate_write"], whole[0])
    _cut_versus_floor(big, row, f"{mb:.0f} MB")
    _in_process(generate(big.parent / "ds_tr_small.jsonl", big.stat().st_size // 10), row, "20 MB")
    if sessions is not None:
        floors = {name: _floor(sessions, row, sessions.name, name) for name, _ in FLOORS}
        _profile(sessions, row, sessions.name, floors["truncate_write"], _versus_stats(sessions, *places[0], row, sessions.name))

    small = generate(big.parent / "ds_tr_small.jsonl", big.stat().st_size // 10)
    with tempfile.TemporaryDirectory() as cache:
        exe = [sys.executable, "-m", "ctxtool", "truncate", "--preset", "head-tail", "--cache-dir", cache, "-o", str(Path(cache) / "o.jsonl")]
        a = peak_rss_mb([*exe, str(small)])
        b = peak_rss_mb([*exe, str(big)])
    row("truncate peak memory", f"{b:.0f} MB on {mb:.0f} MB", f"{a:.0f} MB on {small.stat().st_size / 1e6:.0f} MB", f"{b / a:.2f}x for 10x input", "flat (< 1.5x)")

    if not corpus.is_dir():
        print("  (corpus absent: no per-file savings table)")
        return
    print("\n  tool-output savings per corpus file (bytes / tokens of tool outputs, heuristic tokens)")
    print(f"  {'file':<58} {'preset':<8} {'outputs cut':>11} {'bytes saved':>14} {'tokens saved':>13}")
    files = sorted(p for d in ("claude_code", "codex", "pi", "openai_chat", "messages_jsonl", "sharegpt") for p in (corpus / d).glob("*") if p.is_file())
    for p in files:
        for preset in ("spill", "head-tail"):
            with tempfile.TemporaryDirectory() as cache:
                r = tools_ops.truncate_file(str(p), None, limits=toolout.PRESETS.get(preset), cache=cache)
            pct = f" ({100 * r.bytes_saved / r.bytes_before:.0f}%)" if r.bytes_before else ""
            print(
                f"  {p.parent.name + '/' + p.name:<58.58} {preset:<8} {r.truncated + r.spilled:>11,} "
                f"{r.bytes_saved:>9,}{pct:>5} {r.tokens_saved:>13,}"
            )
