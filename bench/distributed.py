"""`--engine ray` against `--engine local` (skipped when Ray is not installed): the fixed
cost of a run (cluster start, one tiny shard), the per-record cost on the 200 MB dataset
(truncate as shards; records/s per worker), and summary requests in flight against
`--max-in-flight` on a loopback model that answers 429 above the limit."""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
WORKERS = 2
LIMIT = 4


def _ask(job: tuple[str, Any, int]) -> int:
    from ctxtool.run.engines.limit import LimitedSummarizer
    from ctxtool.summarizers import SummaryRequest, get_summarizer

    base_url, limiter, k = job
    summ = LimitedSummarizer(get_summarizer("openai", base_url=base_url, model="m", api_key="k", retries=0), limiter)
    for i in range(4):
        summ.summarize(SummaryRequest(system="s", prompt=f"part {k}.{i}", max_tokens=64))
    return 4


def _truncate(big: Path, engine: Any, d: str, shard_bytes: int) -> tuple[float, int]:
    from ctxtool.run.engines import Sharding
    from ctxtool.tool_outputs import files as tools_ops
    from ctxtool.tool_outputs.algorithms import Limits

    t = time.perf_counter()
    rep = tools_ops.truncate_file(str(big), f"{d}/out-{engine.name}", limits=Limits(max_lines=50, max_bytes=4000),
                                  cache=f"{d}/cache-{engine.name}", engine=Sharding(engine, shard_bytes=shard_bytes))
    return time.perf_counter() - t, rep.transcripts


def run(big: Path, row: Callable[..., None]) -> None:
    try:
        import ray
    except ImportError:
        row("--engine ray", "skipped", "-", "ray is not installed (pip install 'ctxtool[ray]')", "report")
        return
    from ctxtool.run.engines import get_engine

    sys.path.insert(0, str(ROOT / "tests"))
    from fake_llm import FakeLLM  # the tests' loopback OpenAI-compatible server

    t = time.perf_counter()
    ray.init(num_cpus=WORKERS, include_dashboard=False, log_to_driver=False, logging_level="WARNING",
             runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
    start = time.perf_counter() - t
    try:
        with tempfile.TemporaryDirectory(dir=big.parent) as d:
            tiny = Path(d) / "tiny.jsonl"
            with big.open("rb") as f:
                tiny.write_bytes(f.readline())
            local, remote = get_engine("local", workers=WORKERS), get_engine("ray", workers=WORKERS)
            _truncate(tiny, remote, d, 1 << 30)  # Ray Data's first dataset pays for its imports
            fixed_l = min(_truncate(tiny, local, d + f"/l{i}", 1 << 30)[0] for i in range(3))
            fixed_r = min(_truncate(tiny, remote, d + f"/r{i}", 1 << 30)[0] for i in range(3))
            row("--engine ray fixed cost", f"{fixed_r:.2f} s per run (+ {start:.1f} s cluster start)",
                f"--engine local {fixed_l:.2f} s", f"+{fixed_r - fixed_l:.2f} s per run", "report")
            shard = max(1, big.stat().st_size // (4 * WORKERS))
            tl, n = _truncate(big, local, d, shard)
            tr, _ = _truncate(big, remote, d, shard)
            same = all((Path(d) / "out-ray" / p.name).read_bytes() == p.read_bytes()
                       for p in (Path(d) / "out-local").glob("part-*"))
            row(f"truncate --engine ray ({big.stat().st_size / 1e6:.0f} MB, {4 * WORKERS} shards)",
                f"{n / tr:,.0f} records/s, {n / tr / WORKERS:,.0f} per worker ({tr:.1f} s)",
                f"--engine local {n / tl:,.0f} records/s ({tl:.1f} s)",
                f"{1e6 * (tr - tl) / n:+.0f} us per record; outputs {'identical' if same else 'DIFFER'}", "report")
        with FakeLLM(reply="## Goal\nok\n", latency=0.05, rate_limit_above=LIMIT) as llm:
            eng = get_engine("ray")
            limiter = eng.limiter(LIMIT)
            sent = sum(eng.map(_ask, [(llm.openai_base, limiter, k) for k in range(16)]))
            row(f"summary requests in flight, --max-in-flight {LIMIT}",
                f"max {llm.max_in_flight} in flight, {llm.rate_limited} x 429 ({sent} requests, 16 tasks)",
                f"limit {LIMIT}", "within the limit" if llm.max_in_flight <= LIMIT and not llm.rate_limited else "OVER",
                f"<= {LIMIT}, no 429")
    finally:
        ray.shutdown()
