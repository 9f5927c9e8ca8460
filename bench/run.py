"""`make bench`: measured figures printed side by side with their baselines, in one run.

Every figure runs the real code path (the library functions or the `ctxtool` command in a
subprocess) against a baseline measured in the same run on the same data.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import orjson

from bench.gen import generate

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench" / "data"
CORPUS = ROOT.parent / "shared" / "corpus"
BIG = int(os.environ.get("CTXTOOL_BENCH_BYTES", 200_000_000))
ROWS: list[tuple[str, str, str, str, str]] = []


def timed(fn: Callable[[], object], repeat: int = 1) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def row(name: str, measured: str, baseline: str, figure: str, target: str) -> None:
    ROWS.append((name, measured, baseline, figure, target))
    print(f"  {name}: {measured} | baseline {baseline} | {figure} (target {target})", flush=True)


def plain_loop(path: Path) -> int:
    total = 0
    with path.open("rb") as f:
        for line in f:
            rec = orjson.loads(line)
            for m in rec["messages"]:
                c = m.get("content")
                if isinstance(c, str):
                    total += len(c)
    return total


def bench_stats_heuristic(big: Path) -> None:
    from ctxtool import stats

    mb = big.stat().st_size / 1e6
    plain_loop(big)  # warm the page cache for both
    base = timed(lambda: plain_loop(big), 2)
    ours = timed(lambda: stats.stats([str(big)]), 2)
    row(
        "stats --tokenizer heuristic",
        f"{mb / ours:.0f} MB/s ({ours:.2f} s)",
        f"orjson loop {mb / base:.0f} MB/s ({base:.2f} s)",
        f"{base / ours:.2f}x of baseline",
        ">= 0.70x",
    )


def bench_stats_tiktoken(path: Path) -> None:
    from ctxtool import formats, stats, tokens
    from ctxtool.tokens import message_texts

    texts: list[str] = []
    for t in formats.read(str(path)):
        for m in t.messages:
            texts.extend(message_texts(m)[0])
    enc = tokens.load_encoding("o200k_base")

    def single() -> int:
        return sum(len(enc.encode_ordinary(x)) for x in texts)

    base = timed(single, 2)
    ours = timed(lambda: stats.stats([str(path)], tokenizer="o200k_base"), 2)
    mb = path.stat().st_size / 1e6
    row(
        "stats --tokenizer o200k_base",
        f"{mb / ours:.1f} MB/s ({ours:.2f} s, {os.cpu_count()} cores)",
        f"1-thread tiktoken loop {base:.2f} s",
        f"{base / ours:.2f}x",
        ">= 1.6x",
    )


def peak_rss_mb(args: list[str]) -> float:
    code = (
        "import resource, subprocess, sys;"
        f"subprocess.run({args!r}, stdout=subprocess.DEVNULL, check=True);"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(out.stdout.strip()) / 1024


def bench_memory(small: Path, big: Path) -> None:
    exe = [sys.executable, "-m", "ctxtool", "stats", "--json"]
    a = peak_rss_mb([*exe, str(small)])
    b = peak_rss_mb([*exe, str(big)])
    ratio = big.stat().st_size / small.stat().st_size
    row(
        "stats peak memory",
        f"{b:.0f} MB on {big.stat().st_size / 1e6:.0f} MB",
        f"{a:.0f} MB on {small.stat().st_size / 1e6:.0f} MB",
        f"{b / a:.2f}x memory for {ratio:.0f}x input",
        "< 1.5x",
    )


def wall(args: list[str], n: int = 15) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(args, stdout=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def bench_startup() -> None:
    ours = wall([sys.executable, "-m", "ctxtool", "--version"])
    base = wall([sys.executable, "-c", "import typer"])
    row("ctxtool --version", f"{ours * 1000:.0f} ms", f"python -c 'import typer' {base * 1000:.0f} ms", f"{ours / base:.2f}x", "<= 1.0x (+ noise)")


def main() -> int:
    print("ctxtool benchmarks (2 cores); each figure beside its baseline, same run\n", flush=True)
    big = generate(DATA / f"ds{BIG // 1_000_000}.jsonl", BIG)
    small = generate(DATA / f"ds{BIG // 10_000_000}.jsonl", BIG // 10)
    tiny = generate(DATA / "ds20_tok.jsonl", min(20_000_000, BIG // 10))
    print(f"datasets: {big.name} {big.stat().st_size / 1e6:.0f} MB, {small.name} {small.stat().st_size / 1e6:.0f} MB\n")
    sections = [
        ("foundation", [lambda: bench_stats_heuristic(big), lambda: bench_stats_tiktoken(tiny), lambda: bench_memory(small, big), bench_startup]),
    ]
    try:
        from bench import tools as tools_bench

        sections.append(("tool outputs", [lambda: tools_bench.run(big, row, CORPUS)]))
    except ImportError:
        pass
    try:
        from bench import compact as compact_bench

        sections.append(("compaction", [lambda: compact_bench.run(small, row, CORPUS)]))
    except ImportError:
        pass
    sections.append(("distributed", [lambda: __import__("bench.distributed", fromlist=["run"]).run(big, row)]))
    for title, fns in sections:
        print(f"[{title}]", flush=True)
        for fn in fns:
            fn()
        print()
    print("| figure | measured | baseline (same run) | result | target |")
    print("|---|---|---|---|---|")
    for r in ROWS:
        print("| " + " | ".join(r) + " |")
    (DATA / "results.json").write_text(json.dumps(ROWS, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
