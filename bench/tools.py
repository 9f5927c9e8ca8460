"""Tool-output benchmarks: truncate throughput against stats (same run), memory, savings per corpus file."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _versus_stats(path: Path, where: str, base: Path, row: Callable[..., None], label: str = "") -> None:
    import statistics

    from bench.run import CTXTOOL, REPEAT, ratios_of, run_process, spread

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


#: the floors of bench/floors.py the truncate row is set against: (name, what the row says it does)
FLOORS = (
    ("truncate", "floor: parse, cut (toolout.truncate_text), sha256 and zstd each output truncate cuts; no output"),
    ("truncate_write", "floor with the writes: the same, each changed record written again in its source's style "
     "(jsontext.encode), the others copied, the originals and each changed record's messages (a stash) in a pack"),
)


def _floor(path: Path, row: Callable[..., None], label: str = "", name: str = "truncate") -> None:
    """The truncate row's floors (bench/floors.py): the work no truncate can skip, as a
    whole process, against stats over the same file, interleaved; ``truncate_write`` with
    the writes truncate must do (issue 37): the row between the floor and truncate's own is
    what the transcript model, the stash and the cache's bookkeeping cost."""
    import statistics

    from bench.run import CTXTOOL, REPEAT, floor_times, ratios_of, run_process, spread

    st: list[float] = []
    fl: list[float] = []
    floor_times(name, path, repeat=0)  # warm the page cache once
    for _ in range(REPEAT):  # interleaved
        st.append(run_process([*CTXTOOL, "stats", str(path)]))
        fl.extend(floor_times(name, path, repeat=1, warm=False))
    ratios = ratios_of(st, fl)
    row(
        dict(FLOORS)[name] + (f" [{label}]" if label else ""),
        f"{statistics.median(fl):.2f} s",
        f"stats {statistics.median(st):.2f} s",
        spread(ratios) + " of stats' speed",
        "(the best the truncate row can read)",
    )


#: truncate's phases in the profile of :func:`_profile`: (what, module path suffix, function)
PHASES = (
    ("read and parse the records (formats: read_records)", "ctxtool/formats/base.py", "read_records"),
    ("cut each output (toolout.truncate_text)", "ctxtool/tool_outputs/algorithms.py", "truncate_text"),
    ("sha256 of each original", "~", "<built-in method _hashlib.openssl_sha256>"),
    ("compress (zstd) and store each ref (cache: _put)", "ctxtool/cache/__init__.py", "_put"),
    ("put the cut outputs in the messages (stash.apply_changes)", "ctxtool/tool_outputs/stash.py", "apply_changes"),
    ("write each changed record (formats: changed_record)", "ctxtool/formats/base.py", "changed_record"),
)


def _profile(path: Path, row: Callable[..., None], label: str = "") -> None:
    """Where truncate's time goes (issue 37): one process (-j 1) under cProfile on ``path``,
    writing to /dev/shm where it exists, its time split by the functions of :data:`PHASES`
    (each one's cumulative time; none calls another), the rest last; then truncate and stats in
    this process without the profiler (-j 1, interleaved): with the floor row, why the ratio
    cannot reach the target."""
    import cProfile
    import pstats
    import statistics
    import time

    from bench.run import REPEAT, ratios_of, spread
    from ctxtool.stats import files as stats
    from ctxtool.tool_outputs import algorithms as toolout
    from ctxtool.tool_outputs import files as tools_ops

    on = f" [{label}]" if label else ""
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else None

    def truncate(d: str) -> None:
        tools_ops.truncate_file(str(path), str(Path(d) / "o.jsonl"), limits=toolout.PRESETS.get("head-tail"),
                                cache=Path(d) / "c", jobs=1)

    with tempfile.TemporaryDirectory(dir=base) as d:
        truncate(d)  # warm: imports, page cache
    with tempfile.TemporaryDirectory(dir=base) as d:
        pr = cProfile.Profile(time.process_time)  # this process's cpu: the other processes' load does not count
        pr.enable()
        truncate(d)
        pr.disable()
    prof: dict[tuple[str, int, str], tuple[Any, ...]] = pstats.Stats(pr).stats  # type: ignore[attr-defined]

    def cum(where: str, name: str) -> float:
        return sum(v[3] for k, v in prof.items() if k[0].endswith(where) and k[2] == name)

    total = cum("ctxtool/tool_outputs/files.py", "truncate_file")
    rest = total
    for what, where, name in PHASES:
        t = cum(where, name)
        rest -= t
        row(f"  truncate -j 1 profile{on}: {what}", f"{t:.2f} s", f"of {total:.2f} s profiled", f"{100 * t / total:.0f}%",
            "(report)")
    row(f"  truncate -j 1 profile{on}: the rest (counting, notices, the report, the run)", f"{rest:.2f} s",
        f"of {total:.2f} s profiled", f"{100 * rest / total:.0f}%", "(report)")
    st: list[float] = []
    tr: list[float] = []
    stats.stats_files([str(path)], workers=1)
    for _ in range(REPEAT):
        t0 = time.perf_counter()
        stats.stats_files([str(path)], workers=1)
        st.append(time.perf_counter() - t0)
        with tempfile.TemporaryDirectory(dir=base) as d:
            t0 = time.perf_counter()
            truncate(d)
            tr.append(time.perf_counter() - t0)
    row(f"truncate -j 1 in-process, no profiler{on}", f"{statistics.median(tr):.2f} s",
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
    from bench.gen import generate
    from bench.run import peak_rss_mb
    from ctxtool.tool_outputs import algorithms as toolout
    from ctxtool.tool_outputs import files as tools_ops

    mb = big.stat().st_size / 1e6
    shm = Path("/dev/shm")
    places = [("memory, /dev/shm", shm)] if shm.is_dir() and os.access(shm, os.W_OK) else []
    places.append(("disk", big.parent))
    for name, _ in FLOORS:
        _floor(big, row, name=name)
    for where, base in places:
        _versus_stats(big, where, base, row)
    _profile(generate(big.parent / "ds_tr_small.jsonl", big.stat().st_size // 10), row, "20 MB")
    if sessions is not None:
        for name, _ in FLOORS:
            _floor(sessions, row, sessions.name, name)
        _versus_stats(sessions, *places[0], row, sessions.name)

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
