"""Compaction benchmarks: heuristic throughput and ratio; --jobs 8 vs --jobs 1 against a loopback
server with 200 ms latency; a second run served from the summary cache."""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path


def _records(src: Path, dst: Path, n: int) -> Path:
    with src.open() as f, dst.open("w") as out:
        for i, line in enumerate(f):
            if i >= n:
                break
            out.write(line)
    return dst


def run(small: Path, row: Callable[..., None], corpus: Path) -> None:

    from ctxtool.compaction.run import compact_file
    from ctxtool.compaction.settings import CompactOptions
    from ctxtool.summarizers import get_summarizer
    from ctxtool.summarizers.cache import CachedSummarizer

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from fake_llm import FakeLLM  # the tests' loopback OpenAI-compatible server

    opts = CompactOptions(force=True, keep_recent_tokens=2000)
    with tempfile.TemporaryDirectory() as d:
        rep = compact_file(small, Path(d) / "out.jsonl", options=opts, summarizer=get_summarizer("heuristic"))
    row(
        "compact --summarizer heuristic",
        f"{rep.records_per_second:,.0f} records/s ({len(rep.records):,} records, {small.stat().st_size / 1e6:.0f} MB)",
        "-",
        f"compression {rep.ratio:.2f}x ({rep.tokens_before:,} -> {rep.tokens_after:,} tokens)",
        "report",
    )
    reply = "## Goal\nFix the failing build.\n\n## Progress\n### Done\n- [x] read the logs\n\n## Next Steps\n1. rerun tests"
    with tempfile.TemporaryDirectory() as d, FakeLLM(reply=reply, latency=0.2) as server:
        from bench.gen import generate

        src = _records(generate(small.parent / "ds_compact.jsonl", 5_000_000), Path(d) / "fifty.jsonl", 50)
        times = {}
        for jobs in (1, 8):
            summ = CachedSummarizer(
                get_summarizer("openai", model="gemma-3-270m", base_url=server.openai_base, api_key="bench"),
                Path(d) / f"cache{jobs}",
            )
            t = time.perf_counter()
            r = compact_file(src, Path(d) / f"o{jobs}.jsonl", options=opts, summarizer=summ, jobs=jobs)
            times[jobs] = time.perf_counter() - t
            assert r.count("compacted") == 50, json.dumps(r.to_json())[:300]
        row(
            "compact --jobs 8 (50 records, 200 ms/request)",
            f"{times[8]:.2f} s",
            f"--jobs 1 {times[1]:.2f} s",
            f"{times[1] / times[8]:.1f}x faster",
            ">= 6x",
        )
        before = len(server.requests)
        summ = CachedSummarizer(
            get_summarizer("openai", model="gemma-3-270m", base_url=server.openai_base, api_key="bench"), Path(d) / "cache8"
        )
        t = time.perf_counter()
        r = compact_file(src, Path(d) / "again.jsonl", options=opts, summarizer=summ, jobs=8)
        again = time.perf_counter() - t
        same = (Path(d) / "again.jsonl").read_bytes() == (Path(d) / "o8.jsonl").read_bytes()
        row(
            "compact re-run (cache)",
            f"{again:.2f} s, {summ.hits} hits / {summ.misses} misses, {len(server.requests) - before} requests",
            f"first run {times[8]:.2f} s",
            f"identical output: {same}",
            "all from cache",
        )
