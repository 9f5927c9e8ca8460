"""Parquet datasets side by side (issue 34): a generated set shaped like the SWE-agent
trajectory sets on the Hugging Face hub (nebius/SWE-agent-trajectories' columns:
``instance_id``, ``model_name``, ``target``, ``trajectory``, ``exit_status``,
``generated_patch``, ``eval_logs``; the trajectory as OpenAI messages with tool calls, where
the card's has ``role``/``text``), sharded as ``data/train-0000k-of-0000n.parquet``, and the
same rows as one JSON Lines file.

Rows: ``stats`` and ``truncate`` time and peak memory, Parquet against JSON Lines, on this
host and on Ray; ``compact`` against a loopback model answering 429 above the limit, with
``--max-in-flight``: transcripts per second and the peak in flight the model saw.

Size: ``CTXTOOL_BENCH_PARQUET_ROWS`` trajectories (default 5,000: about 90 MB of Parquet,
415 MB as JSON Lines); ``CTXTOOL_BENCH_PARQUET_ROWS=60000`` is a set of 1.18 GB of
Parquet (4.98 GB as JSON Lines), the size of nebius/SWE-agent-trajectories' 12 shards (its
80,036 rows are shorter). Peak memory on Ray is the driver's (the ``ctxtool`` process): the
workers belong to the cluster this module starts.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ROWS = int(os.environ.get("CTXTOOL_BENCH_PARQUET_ROWS", 5_000))
SHARDS = 12  # as nebius/SWE-agent-trajectories
LIMIT = 4  # --max-in-flight, and the loopback model's concurrency limit
COMPACT_ROWS = 120
COMMANDS = (("stats", ["--json"]), ("truncate", ["--max-lines", "50", "--max-bytes", "4000"]))


def generate(root: Path, rows: int = ROWS, shards: int = SHARDS) -> tuple[Path, Path]:
    """The Parquet shards under ``root/parquet/data`` and the same rows as ``root/d.jsonl``
    (reused when there)."""
    import polars as pl

    from bench.gen import record

    pq_dir, jsonl = root / "parquet", root / "d.jsonl"
    done = root / ".done"
    if done.exists() and done.read_text() == f"{rows}/{shards}":
        return pq_dir, jsonl
    rng = random.Random(34)
    pool = [record(rng, i)["messages"] for i in range(300)]
    (pq_dir / "data").mkdir(parents=True, exist_ok=True)
    per = -(-rows // shards)
    with jsonl.open("w") as out:
        for k in range(shards):
            ids = range(k * per, min(rows, (k + 1) * per))
            frame = pl.DataFrame({
                "instance_id": [f"repo__issue-{i}" for i in ids],
                "model_name": ["swe-agent-llama-70b"] * len(ids),
                "target": [i % 3 == 0 for i in ids],
                "trajectory": [pool[i % len(pool)] for i in ids],
                "exit_status": ["submitted" if i % 5 else "exit_context" for i in ids],
                "generated_patch": [f"diff --git a/src/m{i}.py b/src/m{i}.py\n+fix {i}\n" for i in ids],
                "eval_logs": [f"Will execute following command for apply_patch ... tests {i % 7} passed" for i in ids],
            })
            frame.write_parquet(pq_dir / "data" / f"train-{k:05d}-of-{shards:05d}.parquet", row_group_size=500)
            for rec in frame.iter_rows(named=True):  # the same rows, a record per line (the struct's nulls left out)
                rec["trajectory"] = [{a: b for a, b in m.items() if b is not None} for m in rec["trajectory"]]
                out.write(json.dumps(rec) + "\n")
    done.write_text(f"{rows}/{shards}")
    return pq_dir, jsonl


def _load() -> str:
    """The 1, 5 and 15 minute load averages (a shared machine: the figures depend on them)."""
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def _size(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*.parquet")) if p.is_dir() else p.stat().st_size


def _measure(args: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB, the largest process of the run: the command or one of its workers)."""
    code = ("import resource, subprocess, sys, time; t = time.perf_counter();"
            "subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True);"
            "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([sys.executable, "-S", "-c", code, sys.executable, "-m", "ctxtool", *args],
                         capture_output=True, text=True, check=True, env=env)
    secs, rss = out.stdout.split()
    print(f"    {' '.join(a if len(a) < 60 else '...' + a[-40:] for a in args)}: {float(secs):.1f} s, "
          f"peak {int(rss) / 1024:,.0f} MB; load average {_load()}", flush=True)
    return float(secs), int(rss) / 1024


def run(row: Callable[..., None]) -> None:
    data = ROOT / "bench" / "data" / f"parquet{ROWS}"
    pq_dir, jsonl = generate(data)
    print(f"  Parquet set: {ROWS:,} trajectories, {SHARDS} shards, {_size(pq_dir) / 1e6:,.0f} MB Parquet, "
          f"{_size(jsonl) / 1e6:,.0f} MB as JSON Lines; load average {_load()} on {os.cpu_count()} CPUs", flush=True)
    try:
        import ray  # noqa: F401

        have_ray = True
    except ImportError:
        have_ray = False
    with tempfile.TemporaryDirectory(dir=data) as d:
        ray_addr = _start_ray(Path(d)) if have_ray else None
        try:
            local = _stats_and_truncate(row, pq_dir, jsonl, Path(d), ray_addr)
            _compact(row, pq_dir, Path(d), ray_addr)
            _on_ray(row, pq_dir, Path(d), ray_addr, local)  # last: the longest rows
            print(f"  load average at the end: {_load()}", flush=True)
        finally:
            if ray_addr is not None:
                _stop_ray()


def _stats_and_truncate(row: Callable[..., None], pq_dir: Path, jsonl: Path, d: Path,
                        ray_addr: str | None) -> dict[str, float]:
    """The rows on this host: Parquet against JSON Lines, 1 shard against all; returns each
    command's time on the Parquet shards (for the Ray rows, measured last)."""
    local: dict[str, float] = {}
    for name, extra in COMMANDS:
        figures: dict[str, tuple[float, float]] = {}
        for label, src in (("jsonl", jsonl), ("parquet", pq_dir)):
            out = [] if name == "stats" else ["-o", str(d / f"{name}-{label}") + ("/" if src.is_dir() else ".jsonl"),
                                              "--cache-dir", str(d / f"cache-{label}")]
            figures[label] = _measure([name, str(src), *out, *extra])
        j, p = figures["jsonl"], figures["parquet"]
        local[name] = p[0]
        row(f"{name} Parquet ({SHARDS} shards, {ROWS:,} rows), this host",
            f"{p[0]:.1f} s, peak {p[1]:,.0f} MB", f"same rows as JSON Lines {j[0]:.1f} s, peak {j[1]:,.0f} MB",
            f"{p[0] / j[0]:.2f}x the time, {p[1] / j[1]:.2f}x the memory", "report")
        one = sorted((pq_dir / "data").glob("*.parquet"))[0]  # memory flat: one shard against all twelve
        o = _measure([name, str(one), *([] if name == "stats" else ["-o", str(d / f"{name}-one.parquet"),
                                                                     "--cache-dir", str(d / "cache-one")]), *extra])
        row(f"{name} Parquet peak memory, 1 shard against {SHARDS}", f"{SHARDS} shards: peak {p[1]:,.0f} MB",
            f"1 shard ({_size(one) / 1e6:,.0f} MB): peak {o[1]:,.0f} MB", f"{p[1] / o[1]:.2f}x", "flat (about 1x)")
    return local


def _on_ray(row: Callable[..., None], pq_dir: Path, d: Path, ray_addr: str | None, local: dict[str, float]) -> None:
    if ray_addr is None:
        row("Parquet --engine ray", "skipped", "-", "ray is not installed (pip install 'ctxtool[ray]')", "report")
        return
    for name, extra in COMMANDS:
        out = [] if name == "stats" else ["-o", str(d / f"{name}-ray") + "/", "--cache-dir", str(d / "cache-ray")]
        r = _measure([name, str(pq_dir), *out, *extra, "--engine", "ray", "--address", ray_addr])
        row(f"{name} Parquet --engine ray (2 CPUs)", f"{r[0]:.1f} s, driver peak {r[1]:,.0f} MB",
            f"this host {local[name]:.1f} s", f"{r[0] / local[name]:.2f}x the time", "report")


def _compact(row: Callable[..., None], pq_dir: Path, d: Path, ray_addr: str | None) -> None:
    """compact over the first COMPACT_ROWS rows of each of two shards, against a loopback model with a
    concurrency limit of LIMIT and --max-in-flight LIMIT, -j 8 threads per shard."""
    import polars as pl

    sys.path.insert(0, str(ROOT / "tests"))
    from fake_llm import FakeLLM  # the tests' loopback OpenAI-compatible server

    small = d / "compact-in" / "data"
    small.mkdir(parents=True)
    for f in sorted((pq_dir / "data").glob("*.parquet"))[:2]:
        pl.read_parquet(f, n_rows=COMPACT_ROWS // 2).write_parquet(small / f.name, row_group_size=20)
    for label, engine in (("this host", []), ("--engine ray", ["--engine", "ray", "--address", ray_addr] if ray_addr else None)):
        if engine is None:
            continue
        with FakeLLM(reply=_reply, latency=0.2, rate_limit_above=LIMIT) as llm:
            args = ["compact", str(small.parent), "-o", str(d / f"compact-{len(engine)}") + "/", "--force",
                    "--keep-recent-tokens", "2000", "--summarizer", "openai", "--base-url", llm.openai_base,
                    "--summary-model", "m", "-j", "8", "--max-in-flight", str(LIMIT), "--on-error", "skip",
                    "--cache-dir", str(d / f"ccache-{len(engine)}"), *engine]
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "ctxtool", *args], stdout=subprocess.DEVNULL, check=True,
                           env={**os.environ, "CTXTOOL_SUMMARIZER_RETRIES": "0"})
            secs = time.perf_counter() - t
            n = len(llm.requests)
            ok = llm.max_in_flight <= LIMIT and llm.rate_limited == 0
            row(f"compact Parquet --max-in-flight {LIMIT}, {label} (loopback model, 0.2 s a reply, 429 above {LIMIT})",
                f"{COMPACT_ROWS / secs:.1f} transcripts/s ({n} requests in {secs:.1f} s)",
                f"bound {LIMIT / 0.2:.0f} requests/s",
                f"peak {llm.max_in_flight} in flight, {llm.rate_limited} x 429: {'within the limit' if ok else 'OVER'}",
                f"<= {LIMIT} in flight, no 429")


def _reply(req: Any) -> str:
    return "## Goal\n" + " ".join(req.prompt.split()[:12]) + "\n\n## Next Steps\n1. run the tests\n"


_RAY: dict[str, Any] = {}


def _start_ray(d: Path) -> str:
    """A local cluster this process holds for the rows (2 CPUs), joined by each ctxtool process."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="WARNING")
    _RAY["on"] = True
    return str(ray.get_runtime_context().gcs_address)


def _stop_ray() -> None:
    import ray

    ray.shutdown()


if __name__ == "__main__":  # these rows alone: python -m bench.parquet
    def _print(*cells: str) -> None:
        print("| " + " | ".join(cells) + " |", flush=True)

    run(_print)
