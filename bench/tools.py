"""Tool-output benchmarks: truncate throughput against stats (same run), memory, savings per corpus file."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path


def run(big: Path, row: Callable[..., None], corpus: Path) -> None:
    from bench.run import peak_rss_mb
    from ctxtool import stats, toolout, tools_ops

    mb = big.stat().st_size / 1e6
    cores = os.cpu_count() or 1
    # Both as the command runs them (a dataset file: one process per core), best of three.
    # stats only reads (from the page cache); truncate also writes the output and thousands
    # of small cache files. Where /dev/shm exists the first row writes there, so both run at
    # memory speed and the figure is the code's; the second row writes beside the input, on
    # this machine's disk (synced before each timing; caches deleted only at the end), whose
    # small-file writes vary several-fold from one run to the next.
    places = [("memory, /dev/shm", Path("/dev/shm"))] if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else []
    places.append(("disk", big.parent))
    for where, base in places:
        with tempfile.TemporaryDirectory(dir=base) as work:
            st = tr = float("inf")
            for k in range(3):
                os.sync()
                t = time.perf_counter()
                stats.stats([str(big)])
                st = min(st, time.perf_counter() - t)
                d = Path(work) / str(k)
                os.sync()
                t = time.perf_counter()
                rep = tools_ops.truncate_file(str(big), str(d / "out.jsonl"), limits=toolout.PRESETS["seed004"], cache=d / "cache")
                tr = min(tr, time.perf_counter() - t)
            refs = sum(1 for _ in (d / "cache" / "refs").iterdir())
        row(
            f"truncate --preset seed004 ({cores} processes, writing to {where})",
            f"{mb / tr:.0f} MB/s ({tr:.2f} s, {rep.truncated:,} outputs cut, {refs:,} refs written)",
            f"stats {mb / st:.0f} MB/s ({st:.2f} s)",
            f"{st / tr:.2f}x of stats",
            ">= 0.5x",
        )
    small = big.with_name(big.name.replace(str(big.stat().st_size // 1_000_000), "x"))
    from bench.gen import generate

    small = generate(big.parent / "ds_tr_small.jsonl", big.stat().st_size // 10)
    with tempfile.TemporaryDirectory() as cache:
        exe = [sys.executable, "-m", "ctxtool", "truncate", "--preset", "seed004", "--cache-dir", cache, "-o", str(Path(cache) / "o.jsonl")]
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
        for preset in ("seed000", "seed004"):
            with tempfile.TemporaryDirectory() as cache:
                r = tools_ops.truncate_file(str(p), None, limits=toolout.PRESETS[preset], cache=cache)
            pct = f" ({100 * r.bytes_saved / r.bytes_before:.0f}%)" if r.bytes_before else ""
            print(
                f"  {p.parent.name + '/' + p.name:<58.58} {preset:<8} {r.truncated + r.spilled:>11,} "
                f"{r.bytes_saved:>9,}{pct:>5} {r.tokens_saved:>13,}"
            )
