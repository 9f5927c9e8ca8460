"""The runner: one pool for every file command, workers that die with their parent,
reports that merge, the per-record API and the truncation-mode registry."""

from __future__ import annotations

import dataclasses
import doctest
import json
import os
import pickle
import re
import signal
import subprocess
import sys
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from ctxtool import tool_outputs as tools_ops
from ctxtool.errors import CtxtoolError
from ctxtool.history import repair, window
from ctxtool.model import Transcript
from ctxtool.run import parallel, records, runner
from ctxtool.run.operation import MapOp, Operation, Results, RunContext, Task, merge_reports
from ctxtool.tool_outputs import algorithms as toolout
from ctxtool.tool_outputs.common import OpsReport
from ctxtool.tool_outputs.files import RestoreOp, TruncateOp, truncate_file

ROOT = Path(__file__).resolve().parent.parent


def _record(i: int, lines: int = 300) -> dict:
    return {
        "id": f"r{i}",
        "messages": [
            {"role": "system", "content": "agent"},
            {"role": "user", "content": f"task {i}"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": "\n".join(f"line {k} of output {i}" for k in range(lines + i))},
            {"role": "assistant", "content": f"done {i}"},
            {"role": "tool", "tool_call_id": "nobody", "content": "an orphan result"},
        ],
    }


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    p = tmp_path / "ds.jsonl"
    p.write_text("".join(json.dumps(_record(i)) + "\n" for i in range(30)))
    return p


def test_window_and_repair_in_parallel_equal_serial(dataset: Path, tmp_path: Path) -> None:
    for name, fn, kw in (("window", window.window_file, {"max_messages": 2}), ("repair", repair.repair_file, {})):
        a = fn(str(dataset), str(tmp_path / f"{name}1.jsonl"), jobs=1, **kw)
        b = fn(str(dataset), str(tmp_path / f"{name}2.jsonl"), jobs=2, **kw)
        assert (tmp_path / f"{name}1.jsonl").read_bytes() == (tmp_path / f"{name}2.jsonl").read_bytes()
        ja, jb = a.to_json(), b.to_json()
        assert ja.pop("output") != jb.pop("output")
        assert ja == jb and len(ja["transcripts"]) == 30 and set(ja) >= {"totals", "transcripts"}
    assert b.totals()["counts"] == {"orphan_result_dropped": 30, "empty_message_dropped": 30}
    dry = window.window_file(str(dataset), None, max_messages=2)  # a dry run writes nothing
    assert dry.dropped == 30 * 3 and dry.output is None


def test_validate_and_stats_in_parallel_equal_serial(dataset: Path) -> None:
    from ctxtool.history import validate
    from ctxtool.stats.files import stats_files

    body = dataset.read_text().splitlines()
    body.insert(20, "{broken")
    dataset.write_text("\n".join(body) + "\n")
    a, b = validate.validate([str(dataset)], jobs=1), validate.validate([str(dataset)], jobs=2)
    assert a.to_json() == b.to_json() and a.transcripts == 30
    assert [p.code for p in a.problems].count("unreadable") == 1 and a.problems[-1].line == 21
    sa = stats_files([str(dataset)], workers=1, on_error="skip")
    assert sa.to_json() == stats_files([str(dataset)], workers=2, on_error="skip").to_json() and len(sa.skipped) == 1


def _slow_and_picky(t):  # type: ignore[no-untyped-def]
    time.sleep(0.002 * (t.index % 5))  # finishes out of order
    if t.index % 7 == 3:
        raise CtxtoolError("no thanks")
    return t.index


def test_threads_keep_the_order_and_failed_transcripts_go_to_the_policy(dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "o.jsonl"
    run = runner.run_file(MapOp(_slow_and_picky), str(dataset), str(out), on_error="skip", threads=4)
    kept = [i for i in range(30) if i % 7 != 3]
    assert run.report.items == kept and run.transcripts == len(kept)
    assert [json.loads(x)["id"] for x in out.read_text().splitlines()] == [f"r{i}" for i in kept]
    assert run.skipped[0] == f"{dataset}:4: no thanks" and len(run.skipped) == 4
    with pytest.raises(CtxtoolError) as e:
        runner.run_file(MapOp(_slow_and_picky), str(dataset), str(out), threads=4)
    assert e.value.line == 4 and len(out.read_text().splitlines()) == len(kept)  # the output is untouched


@dataclass(frozen=True)
class LastTwo(Operation[Results[int]]):
    """A toy operation asking the runner for what compaction needs: the whole input read
    first, a failed transcript written as read, and a check of the written output that can
    ask for some transcripts as they were read. It keeps each record's last two messages."""

    read_first: ClassVar[bool] = True
    keep_failed: ClassVar[bool] = True
    checks_output: ClassVar[bool] = True
    reject: str = '"r5"'
    most: int = 100

    def start(self, ctx: RunContext) -> Task[Results[int]]:
        return LastTwoTask(self, ctx)


class LastTwoTask(Task[Results[int]]):
    def __init__(self, op: LastTwo, ctx: RunContext) -> None:
        self.op, self.ctx, self.results, self.total = op, ctx, Results[int](), 0
        self.checks: list[bool] = []

    def begin(self, ahead: Sequence[Transcript]) -> None:
        if not ahead or len(ahead) > self.op.most:  # read first: it sees every transcript
            raise CtxtoolError(f"{len(ahead)} transcripts: not doing that", path=self.ctx.path)
        self.total = len(ahead)

    def apply(self, t: Transcript) -> Transcript:
        if t.index % 7 == 3:
            raise CtxtoolError("no thanks")
        return dataclasses.replace(t, entries=t.entries[-2:])  # a new transcript; t stays as read

    def commit(self, t: Transcript) -> None:
        self.results.items.append(t.index)

    def failed(self, t: Transcript, err: CtxtoolError) -> None:
        self.results.items.append(-t.index)

    def check(self, tmp: str, written: Sequence[Transcript], read: Sequence[Transcript], last: bool) -> Collection[int]:
        self.checks.append(last)
        lines = Path(tmp).read_text().splitlines()
        assert len(lines) == len(written) == len(read) == self.total
        return [i for i, line in enumerate(lines) if self.op.reject in line and len(json.loads(line)["messages"]) == 2]

    def finish(self) -> Results[int]:
        assert self.checks == [False, True]  # written, rejected in part, written again
        return self.results


def test_replacements_kept_failures_and_a_check_that_asks_for_originals(dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "o.jsonl"
    for threads in (1, 4):
        run = runner.run_file(LastTwo(), str(dataset), str(out), on_error="skip", threads=threads)
        assert run.transcripts == 30 and not run.skipped  # failed transcripts are written, not skipped
        assert run.report.items == [-i if i % 7 == 3 else i for i in range(30)]
        src, got = dataset.read_bytes().splitlines(), out.read_bytes().splitlines()
        for i in range(30):
            as_read = i % 7 == 3 or i == 5  # failed, or rejected by the check
            assert (got[i] == src[i]) == as_read, i
            assert len(json.loads(got[i])["messages"]) == (6 if as_read else 2)
    with pytest.raises(CtxtoolError, match="no thanks") as e:  # under fail the first failure stops the run
        runner.run_file(LastTwo(), str(dataset), str(tmp_path / "o2.jsonl"), threads=4)
    assert e.value.line == 4 and not (tmp_path / "o2.jsonl").exists()
    out.write_text("kept")
    with pytest.raises(CtxtoolError, match="30 transcripts: not doing that"):  # before any apply or write
        runner.run_file(LastTwo(most=10), str(dataset), str(out))
    assert out.read_text() == "kept"


def test_operations_and_jobs_pickle_and_reports_merge(dataset: Path, tmp_path: Path) -> None:
    op = TruncateOp(cache=str(tmp_path / "c"), limits=toolout.Limits(max_lines=10))
    job = parallel.RangeJob(op, str(dataset), 0, dataset.stat().st_size, 1, "openai", None, "fail", True)
    res = parallel.run_range(pickle.loads(pickle.dumps(job)))  # what a worker on another machine does
    res = pickle.loads(pickle.dumps(res))
    whole = truncate_file(str(dataset), None, limits=toolout.Limits(max_lines=10), cache=tmp_path / "c", jobs=1)
    assert res.report.truncated == whole.truncated == 30 and res.transcripts == 30 and len(res.events) == 30
    a, b = OpsReport("truncate", "x", truncated=2, bytes_before=10), OpsReport("truncate", "x", truncated=3)
    assert merge_reports([a, b]).truncated == 5 and a.bytes_before == 10
    with pytest.raises(ValueError):
        merge_reports([])


def test_per_record_api_round_trip_and_merge(dataset: Path, tmp_path: Path) -> None:
    cache = str(tmp_path / "c")
    trunc = TruncateOp(cache=cache, limits=toolout.Limits(max_lines=50))
    lines = dataset.read_bytes().splitlines()
    results = [records.process(trunc, rec, path=str(dataset), line=n, events=True) for n, rec in enumerate(lines, 1)]
    results = pickle.loads(pickle.dumps(results))
    assert all(r.changed and r.format == "openai" for r in results)
    assert results[4].events[0]["line"] == 5 and results[4].events[0]["file"] == str(dataset)
    merged = merge_reports(r.report for r in results)
    whole = truncate_file(str(dataset), str(tmp_path / "out.jsonl"), limits=toolout.Limits(max_lines=50), cache=cache)
    assert b"\n".join(r.data for r in results) + b"\n" == (tmp_path / "out.jsonl").read_bytes()
    for k in tools_ops.common.SUMMED:
        if k != "refs_written":  # the file run found the refs already written
            assert getattr(merged, k) == getattr(whole, k), k
    back = [records.process(RestoreOp(cache=cache), r.data, path="x.jsonl", line=n) for n, r in enumerate(results, 1)]
    assert [b.data for b in back] == lines  # byte for byte
    same = records.process(TruncateOp(cache=cache), lines[0], path="x.jsonl", line=1)
    assert not same.changed and same.data == lines[0]


def test_refs_written_counts_each_ref_once_whoever_stored_it(tmp_path: Path) -> None:
    """Two processes meeting the same output at the same time may both store it: the run's
    "refs written" counted it once or twice, as they raced (run to run: 15 to 18 refs written
    for one corpus file on -j 2). Parts count the refs by id, so every run says what -j 1 says."""
    a, b = OpsReport("truncate", "x"), OpsReport("truncate", "x")
    for r, ids in ((a, ["r1", "r2", "r2"]), (b, ["r2", "r3"])):
        for i in ids:
            r.stored(i)
    assert (a.refs_written, b.refs_written) == (2, 2)
    a.merge(pickle.loads(pickle.dumps(b)))
    assert a.refs_written == 3
    p = tmp_path / "dup.jsonl"  # every output twice: in the first half and in the second
    recs = [_record(i % 6, lines=120) for i in range(12)]
    p.write_text("".join(json.dumps({**r, "id": f"r{k}"}) + "\n" for k, r in enumerate(recs)))
    counts = set()
    for jobs in (1, 2, 2, 2):
        rep = truncate_file(str(p), str(tmp_path / f"out{jobs}.jsonl"), limits=toolout.Limits(max_lines=50),
                            cache=str(tmp_path / f"cache-{len(counts)}-{jobs}-{os.urandom(4).hex()}"), jobs=jobs)
        counts.add(rep.refs_written)
    assert len(counts) == 1 and counts.pop() > 0


def test_per_record_fast_read_is_the_full_model(dataset: Path) -> None:
    """records.process reads through the operation's task, as a file run does: stats' tally and
    window's plan from the parsed record give what the full model gives, record by record."""
    from ctxtool.stats.op import StatsOp

    lines = dataset.read_bytes().splitlines() + (ROOT / "samples" / "openai_dataset.jsonl").read_bytes().splitlines()
    for n, rec in enumerate(lines, 1):
        for fast, slow in ((StatsOp(), StatsOp(fast=False)),
                           (window.WindowOp(max_messages=3), window.WindowOp(max_messages=3, fast=False))):
            a = records.process(fast, rec, path="d.jsonl", line=n)
            b = records.process(slow, rec, path="d.jsonl", line=n)
            assert (a.data, a.changed, a.format) == (b.data, b.changed, b.format), n
            if isinstance(fast, StatsOp):
                assert a.report.totals.to_json() == b.report.totals.to_json(), n
            else:
                assert [dataclasses.asdict(x) for x in a.report.items] == [dataclasses.asdict(x) for x in b.report.items], n


def _same_result(a: records.RecordResult[Any], b: records.RecordResult[Any]) -> None:
    assert (a.data, a.changed, a.format, a.skipped, a.events) == (b.data, b.changed, b.format, b.skipped, b.events)
    if hasattr(a.report, "totals"):
        assert a.report.totals.to_json() == b.report.totals.to_json()
        assert [t.to_json() for t in a.report.kept()] == [t.to_json() for t in b.report.kept()]
        assert a.report.largest == b.report.largest
    else:
        assert repr(a.report) == repr(b.report)


def test_per_record_parsed_record_is_its_compact_bytes(dataset: Path, tmp_path: Path) -> None:
    """records.process takes a record already parsed (the dict a pipeline holding dataset rows
    has): the same result as its compact JSON bytes, byte for byte, and the caller's dict is
    never changed (an operation that may change what it reads gets a copy)."""
    import copy

    from ctxtool.io.jsonl import dumps
    from ctxtool.stats.op import StatsOp

    lines = dataset.read_bytes().splitlines() + (ROOT / "samples" / "openai_dataset.jsonl").read_bytes().splitlines()
    ops: list[Operation[Any]] = [
        StatsOp(), StatsOp(fast=False), StatsOp(keep=1), window.WindowOp(max_messages=3),
        window.WindowOp(max_messages=3, fast=False), window.WindowOp(max_chars=400), repair.RepairOp(),
    ]
    caches = iter(range(10**6))

    def truncate() -> TruncateOp:  # a cache of its own each time: every call writes its refs
        return TruncateOp(cache=str(tmp_path / f"c{next(caches)}"), limits=toolout.Limits(max_lines=50))

    changed = 0
    for n, rec in enumerate(lines, 1):
        obj = json.loads(rec)
        before = copy.deepcopy(obj)
        for op in [*ops, None]:
            for fmt in (None, "openai"):
                a = records.process(op or truncate(), obj, path="d.jsonl", line=n, fmt=fmt)
                b = records.process(op or truncate(), dumps(obj), path="d.jsonl", line=n, fmt=fmt)  # the bytes path
                _same_result(a, b)
                assert obj == before, (n, op)
                changed += a.changed
    assert changed  # some records were written changed (from the parsed value: in compact style)
    rec2 = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
    res = records.process(window.WindowOp(max_messages=1, keep_first_user=False), rec2, path="data.jsonl", line=7)
    assert res.data == b'{"messages":[{"role":"assistant","content":"hello"}]}' and res.changed and len(rec2["messages"]) == 2


def test_per_record_detection_scores_each_record_once(dataset: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """records.process detects the record's format, then its task's read asks again: the source
    keeps the answer (formats.detect), and a format detection picked needs no scores for the
    error hint of a named format (formats._read_forced). Same results, one scoring per record."""
    from ctxtool import formats
    from ctxtool.stats.op import StatsOp

    rec = dataset.read_bytes().splitlines()[0]
    ops = (StatsOp(), StatsOp(fast=False), window.WindowOp(max_messages=3), window.WindowOp(max_messages=3, fast=False))
    before = [records.process(op, rec, path="d.jsonl", line=1) for op in ops]
    calls: list[int] = []
    scores = formats._scores

    def counted(sample: Any, src: Any) -> Any:
        calls.append(1)
        return scores(sample, src)

    monkeypatch.setattr(formats, "_scores", counted)
    for op, b in zip(ops, before, strict=True):
        calls.clear()
        a = records.process(op, rec, path="d.jsonl", line=1)
        assert len(calls) == 1, op
        assert (a.data, a.changed, a.format, a.skipped) == (b.data, b.changed, b.format, b.skipped)
    calls.clear()
    records.process(StatsOp(fast=False), rec, path="d.jsonl", line=1, fmt="openai")  # named, and its own sniff says yes
    assert calls == []
    for op in ops:  # a format named: stats' and window's fast reads ask only its own detection
        b = records.process(op, rec, path="d.jsonl", line=1, fmt="openai")
        assert calls == [] and (b.data, b.format) == (before[ops.index(op)].data, "openai")


def test_per_record_errors_name_the_record() -> None:
    with pytest.raises(CtxtoolError) as e:
        records.process(window.WindowOp(), b'{"messages": [1, 2', path="d.jsonl", line=42)
    assert e.value.line == 42 and e.value.path == "d.jsonl"
    skipped = records.process(window.WindowOp(), b"{oops", path="d.jsonl", line=3, on_error="skip")
    assert skipped.data == b"" and "d.jsonl:3" in skipped.skipped[0]
    session = (ROOT / "samples" / "pi_session.jsonl").read_bytes().splitlines()[0]
    with pytest.raises(CtxtoolError, match="not a whole transcript"):
        records.process(window.WindowOp(), session, path="s.jsonl", line=1)


def test_records_doctest_and_readme_example(monkeypatch: pytest.MonkeyPatch) -> None:
    import ctxtool.run.records

    monkeypatch.chdir(ROOT)  # the README's paths are the repository's
    assert doctest.testmod(ctxtool.run.records).failed == 0
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- records example -->\n```pycon\n(.*?)```", readme, re.S)
    assert block, "README: the per-record example"
    test = doctest.DocTestParser().get_doctest(block.group(1), {}, "README", "README.md", 0)
    runner_ = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner_.run(test)
    assert runner_.summarize(verbose=False).failed == 0


# -- a truncation mode is one class and one registry line ------------------------------


class Tail(toolout.TruncationMode):
    name = "tail"
    description = "keep the last lines and characters"

    def line_split(self, limits: toolout.Limits) -> tuple[int, int]:
        return 0, (limits.head_lines + limits.tail_lines or limits.max_lines)

    def cut_size(self, text: str, max_chars: int, max_bytes: int, total_lines: int, kept_lines: int) -> tuple[str, int]:
        out = text[-max_chars:]
        while toolout.utf8_len(out) > max_bytes:
            out = out[1:]
        return out, min(kept_lines, out.count("\n"))


def test_a_new_truncation_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    toolout.register_mode(Tail)  # the registry line (undone after)
    try:
        _use_the_tail_mode(tmp_path, monkeypatch)
    finally:
        toolout.MODES.unregister("tail")


def _use_the_tail_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from ctxtool.cli import app

    cut = toolout.truncate_text("\n".join(str(i) for i in range(100)), toolout.Limits(mode="tail", max_lines=3))
    assert cut.text.endswith("97\n98\n99") and cut.text.startswith("[... omitted 97 of 100 lines ...]")
    src = tmp_path / "chat.jsonl"
    src.write_text(json.dumps(_record(1)) + "\n")
    monkeypatch.setenv("CTXTOOL_CACHE_DIR", str(tmp_path / "c"))
    r = CliRunner().invoke(app, ["truncate", str(src), "--mode", "tail", "--max-lines", "2", "-o", str(tmp_path / "o.jsonl")])
    assert r.exit_code == 0, r.output
    out = json.loads((tmp_path / "o.jsonl").read_text())["messages"][3]["content"]
    assert out.startswith("[... omitted 299 of 301 lines ...]\nline 299 of output 1\nline 300 of output 1")
    bad = CliRunner().invoke(app, ["truncate", str(src), "--mode", "middle"])
    assert bad.exit_code == 2 and "choose one of: head, head_tail, tail" in bad.output  # the choices: the registry's
    assert toolout.register_mode(Tail) is Tail and "tail" in toolout.MODES
    assert toolout.MODES.names() == ("head", "head_tail", "tail")


# -- workers die with their parent (issue 10 item 8) -------------------------------------


def _children(pid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d))
    return out


def _alive(pids: list[int]) -> list[int]:
    left = []
    for p in pids:
        try:
            state = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":  # a zombie has exited (only its entry waits for a reaper)
            left.append(p)
    return left


def _kill_when_workers_run(proc: subprocess.Popen, want: int) -> list[int]:
    deadline = time.monotonic() + 30
    kids: list[int] = []
    while time.monotonic() < deadline:
        kids = _children(proc.pid)
        if len(kids) >= want or proc.poll() is not None:
            break
        time.sleep(0.01)
    assert proc.poll() is None and len(kids) >= want, "the workers never started"
    time.sleep(0.1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    end = time.monotonic() + 2
    while _alive(kids) and time.monotonic() < end:
        time.sleep(0.02)
    return _alive(kids)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_truncate_workers_die_when_the_parent_is_killed(tmp_path: Path) -> None:
    ds = tmp_path / "big.jsonl"
    with ds.open("w") as fh:
        for i in range(1500):
            fh.write(json.dumps(_record(i, 2000)) + "\n")
    env = {**os.environ, "CTXTOOL_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxtool", "truncate", str(ds), "--jobs", "2", "--max-lines", "5", "-o", str(tmp_path / "o.jsonl")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
    )
    assert _kill_when_workers_run(proc, 2) == []
    assert not (tmp_path / "o.jsonl").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".ctxtool-parts")]  # left by the killed run
    # what the killed run left beside its output (parts named for its pid) goes with the next run there
    small = tmp_path / "small.jsonl"
    small.write_text("".join(json.dumps(_record(i)) + "\n" for i in range(4)))
    truncate_file(str(small), str(tmp_path / "o2.jsonl"), cache=tmp_path / "cache", jobs=2)
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_pipe_alone_ends_the_workers(tmp_path: Path) -> None:
    script = tmp_path / "pool.py"
    script.write_text(
        "import time\n"
        "from ctxtool.run.pool import worker_pool\n"
        "def nap(x):\n    time.sleep(60)\n"
        "if __name__ == '__main__':\n"
        "    with worker_pool(2, pdeathsig=False) as ex:\n"
        "        fs = [ex.submit(nap, i) for i in range(2)]\n"
        "        time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path)
    assert _kill_when_workers_run(proc, 2) == []
