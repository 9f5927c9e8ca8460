"""``compact --max-in-flight N`` against a provider that answers 429 above N requests in
flight (tests/fake_llm.py ``rate_limit_above``): without the bound a parallel run meets a
429 storm; with it, never more than N at once, no 429, and a re-run served from the
summary cache sends nothing. The engine registry: a new engine is one class."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import ClassVar

import pytest
from fake_llm import FakeLLM
from test_compact import opts, write_dataset
from test_compact_remote import REPLY, remote

from ctxtool.cli import main
from ctxtool.compaction import run as cp
from ctxtool.errors import CtxtoolError
from ctxtool.history.window import WindowOp, window_file
from ctxtool.run.engines import ENGINES, Sharding, get_engine, register_engine
from ctxtool.run.engines.base import Engine, J, T, ThreadLimiter
from ctxtool.run.engines.limit import LimitedSummarizer
from ctxtool.run.runner import run_file
from ctxtool.summarizers.cache import CachedSummarizer


def test_no_bound_meets_a_429_storm_and_the_bound_prevents_it(tmp_path: Path) -> None:
    src = write_dataset(tmp_path / "d.jsonl", n=8, turns=3, filler=300)
    with FakeLLM(reply=REPLY, latency=0.2, rate_limit_above=2) as llm:
        with pytest.raises(CtxtoolError, match="429"):
            cp.compact_file(src, tmp_path / "storm.jsonl", options=opts(), summarizer=remote("openai", llm), jobs=8)
        assert llm.rate_limited > 0  # what a parallel run does to a provider's concurrency limit
    with FakeLLM(reply=REPLY, latency=0.2, rate_limit_above=2) as llm:
        limiter = ThreadLimiter(2)
        summ = CachedSummarizer(LimitedSummarizer(remote("openai", llm), limiter), tmp_path / "cache")
        rep = cp.compact_file(src, tmp_path / "o1.jsonl", options=opts(), summarizer=summ, jobs=8)
        assert llm.rate_limited == 0 and llm.max_in_flight <= 2 and limiter.peak == 2
        assert rep.count("compacted") == 8 and len(llm.requests) == 8
        again = CachedSummarizer(LimitedSummarizer(remote("openai", llm), ThreadLimiter(2)), tmp_path / "cache")
        rep2 = cp.compact_file(src, tmp_path / "o2.jsonl", options=opts(), summarizer=again, jobs=8)
        assert len(llm.requests) == 8 and rep2.cache_hits == 8  # the re-run sends nothing
    assert (tmp_path / "o1.jsonl").read_bytes() == (tmp_path / "o2.jsonl").read_bytes()


def test_cli_max_in_flight(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("CTXTOOL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CTXTOOL_SUMMARIZER_RETRIES", "0")
    src = write_dataset(tmp_path / "d.jsonl", n=6, turns=3, filler=300)
    with FakeLLM(reply=REPLY, latency=0.1, rate_limit_above=1) as llm:
        args = ["compact", str(src), "--force", "--keep-recent-tokens", "400", "--summarizer", "openai", "--base-url",
                llm.openai_base, "--summary-model", "m", "-j", "6", "--max-in-flight", "1"]
        assert main([*args, "-o", str(tmp_path / "a.jsonl")]) == 0, capsys.readouterr().err
        assert llm.max_in_flight == 1 and llm.rate_limited == 0 and len(llm.requests) == 6
        assert main([*args, "-o", str(tmp_path / "b.jsonl")]) == 0
        assert len(llm.requests) == 6
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()


class Serial(Engine):
    """A new engine is one class and one registry line: this one runs jobs in reverse order
    (results still come back in job order)."""

    name: ClassVar[str] = "serial-reversed"

    def map(self, fn: Callable[[J], T], jobs: Sequence[J]) -> list[T]:
        return [fn(j) for j in reversed(jobs)][::-1]


def test_a_new_engine_is_one_class_and_one_registry_line(tmp_path: Path) -> None:
    src = write_dataset(tmp_path / "d.jsonl", n=9, turns=2)
    register_engine(Serial)
    try:
        _run_on_the_new_engine(src, tmp_path)
    finally:
        ENGINES.unregister("serial-reversed")


def _run_on_the_new_engine(src: Path, tmp_path: Path) -> None:
    assert ENGINES.names() == ("local", "ray", "serial-reversed")
    plain = window_file(str(src), str(tmp_path / "p.jsonl"), max_messages=4)
    with get_engine("serial-reversed") as eng:
        sh = Sharding(eng, join=True, shard_bytes=src.stat().st_size // 3 + 1)
        rep = window_file(str(src), str(tmp_path / "s.jsonl"), max_messages=4, engine=sh)
    assert (tmp_path / "s.jsonl").read_bytes() == (tmp_path / "p.jsonl").read_bytes()
    assert [r.to_json() for r in rep.transcripts] == [r.to_json() for r in plain.transcripts]
    with pytest.raises(CtxtoolError, match="unknown engine"):
        get_engine("nope")


def _double(x: int) -> int:
    return 2 * x


def test_local_imap_gives_each_result_before_the_next_job_runs() -> None:
    """A sharded run passes each shard's report on as it is done (memory flat in the number of
    shards): the engine's imap is lazy, in order, and equals map."""
    ran: list[int] = []

    def job(x: int) -> int:
        ran.append(x)
        return 2 * x

    it = get_engine("local", workers=1).imap(job, [1, 2, 3])
    assert next(it) == 2 and ran == [1]
    assert list(it) == [4, 6] and ran == [1, 2, 3]
    with get_engine("local", workers=2) as eng:  # forked workers
        assert list(eng.imap(_double, list(range(7)))) == eng.map(_double, list(range(7))) == [2 * x for x in range(7)]


def test_local_engine_shard_directory_and_glob(tmp_path: Path) -> None:
    for i in range(3):
        write_dataset(tmp_path / f"in{i}.jsonl", n=2 + i, turns=2)
    with get_engine("local", workers=2) as eng:
        run = window_file(str(tmp_path / "in*.jsonl"), str(tmp_path / "out"), max_messages=4, engine=Sharding(eng))
    assert sorted(p.name for p in (tmp_path / "out").glob("part-*")) == [f"part-0000{i}.jsonl" for i in range(3)]
    for i in range(3):
        one = window_file(str(tmp_path / f"in{i}.jsonl"), str(tmp_path / f"one{i}.jsonl"), max_messages=4)
        assert (tmp_path / "out" / f"part-0000{i}.jsonl").read_bytes() == (tmp_path / f"one{i}.jsonl").read_bytes()
        assert len(one.transcripts) == 2 + i
    assert len(run.transcripts) == 2 + 3 + 4
    assert WindowOp(max_messages=4) == WindowOp(max_messages=4)  # settings compare by value: a re-run matches
    with get_engine("local", workers=2) as eng:
        again = run_file(WindowOp(max_messages=4), str(tmp_path / "in*.jsonl"), str(tmp_path / "out"), engine=Sharding(eng))
        assert [s["reused"] for s in again.shards] == [True, True, True]  # type: ignore[attr-defined]
        import os

        os.utime(tmp_path / "in1.jsonl", ns=(1, 1))  # an input changed (same size): its shard is redone
        again = run_file(WindowOp(max_messages=4), str(tmp_path / "in*.jsonl"), str(tmp_path / "out"), engine=Sharding(eng))
        assert [s["reused"] for s in again.shards] == [True, False, True]  # type: ignore[attr-defined]


def test_import_ctxtool_imports_neither_ray_nor_fsspec() -> None:
    import subprocess
    import sys

    code = ("import sys, ctxtool, ctxtool.run.engines, ctxtool.io.urls, ctxtool.cli.common; "
            "bad = [m for m in ('ray', 'fsspec', 's3fs') if m in sys.modules]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_joined_run_to_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write_dataset(tmp_path / "d.jsonl", n=3, turns=2)
    assert main(["window", str(src), "--max-messages", "4", "--engine", "local", "--join"]) == 0
    joined = capsys.readouterr().out
    assert main(["window", str(src), "--max-messages", "4"]) == 0
    assert capsys.readouterr().out == joined
    assert main(["window", str(src), "--max-messages", "4", "--engine", "local", "-o", str(tmp_path / "o.jsonl"),
                 "--address", "x:1"]) != 0


def test_stdin_is_not_sharded(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["window", "-", "--engine", "local", "--join"]) == 2
    assert "stdin cannot be cut into shards" in capsys.readouterr().err


def test_trim_as_shards_equals_a_plain_run(tmp_path: Path) -> None:
    from ctxtool.tool_outputs import files as tools_ops

    src = write_dataset(tmp_path / "d.jsonl", n=8, turns=3, filler=6000)
    plain = tools_ops.trim_file(str(src), str(tmp_path / "p.jsonl"), budget=500, cache=tmp_path / "c0")
    with get_engine("local", workers=2) as eng:
        sh = Sharding(eng, join=True, shard_bytes=src.stat().st_size // 3 + 1)
        rep = tools_ops.trim_file(str(src), str(tmp_path / "s.jsonl"), budget=500, cache=tmp_path / "c1", engine=sh)
    assert (tmp_path / "s.jsonl").read_bytes() == (tmp_path / "p.jsonl").read_bytes()
    assert rep.trimmed == plain.trimmed > 0


def test_compact_as_shards_equals_a_plain_run(tmp_path: Path) -> None:
    for i in range(2):
        write_dataset(tmp_path / f"in{i}.jsonl", n=3, turns=3, filler=6000)
    with get_engine("local", workers=2) as eng:
        rep = cp.compact_file(str(tmp_path / "in*.jsonl"), str(tmp_path / "out"), options=opts(), engine=Sharding(eng))
    assert rep.count("compacted") == 6
    for i in range(2):
        cp.compact_file(tmp_path / f"in{i}.jsonl", tmp_path / f"one{i}.jsonl", options=opts())
        assert (tmp_path / "out" / f"part-0000{i}.jsonl").read_bytes() == (tmp_path / f"one{i}.jsonl").read_bytes()


def test_cli_max_in_flight_over_the_local_engine_processes(tmp_path: Path) -> None:
    """Shards on this host's worker processes (a glob into -o DIR/): the bound is a manager's
    semaphore every process shares, not a thread semaphore (which does not travel to them)."""
    import json
    import os
    import subprocess
    import sys

    for k in range(4):
        write_dataset(tmp_path / f"d{k}.jsonl", n=2, turns=3, filler=300 + 10 * k)
    with FakeLLM(reply=REPLY, latency=0.15, rate_limit_above=2) as llm:
        r = subprocess.run(
            [sys.executable, "-m", "ctxtool", "compact", str(tmp_path / "d*.jsonl"), "-o", str(tmp_path / "out") + "/",
             "--force", "--keep-recent-tokens", "400", "--summarizer", "openai", "--base-url", llm.openai_base,
             "--summary-model", "m", "-j", "3", "--max-in-flight", "2", "--cache-dir", str(tmp_path / "c")],
            capture_output=True, text=True, timeout=300, env={**os.environ, "CTXTOOL_SUMMARIZER_RETRIES": "0"})
        assert r.returncode == 0, r.stderr
        assert llm.rate_limited == 0 and llm.max_in_flight <= 2 and len(llm.requests) == 8
    report = json.loads((tmp_path / "out" / "_report.json").read_text())
    assert report["engine"] == "local" and len(report["shards"]) == 4 and report["transcripts"] == 8
