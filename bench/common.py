"""What every bench module measures with: where the checkout is, how a whole ctxtool process
is run and timed, its peak memory, and how paired times become a ratio and its spread.
:mod:`bench.run` (which runs every section) and :mod:`bench.tools` take them from here, so
no bench module imports :mod:`bench.run`."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPEAT = int(os.environ.get("CTXTOOL_BENCH_REPEAT", 3))
CTXTOOL = [sys.executable, "-m", "ctxtool"]


def timed(fn: Callable[[], object], repeat: int = 1) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def run_process(args: Sequence[str], env: dict[str, str] | None = None) -> float:
    """Wall seconds of one whole process."""
    t = time.perf_counter()
    subprocess.run(list(args), stdout=subprocess.DEVNULL, env=env, check=True)
    return time.perf_counter() - t


def peak_rss_mb(args: Sequence[str]) -> float:
    """Peak RSS (MB) of a process and its workers, measured from a small parent (a child
    forked from this one would count this process's pages until its exec)."""
    code = (
        "import resource, subprocess, sys;"
        "subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True);"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    out = subprocess.run([sys.executable, "-S", "-c", code, *args], capture_output=True, text=True, check=True)
    return int(out.stdout.strip()) / 1024


def spread(ratios: list[float]) -> str:
    return f"{statistics.median(ratios):.2f}x (runs {min(ratios):.2f}-{max(ratios):.2f})"


def ratios_of(peer: list[float], ours: list[float]) -> list[float]:
    """How many times faster ours is, pair by pair."""
    return [p / o for p, o in zip(peer, ours, strict=True)]
