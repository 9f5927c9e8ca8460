"""Many small files (a user's sessions): whole files run on every core
(:func:`ctxtool.run.manyfiles.run_files`); the results must equal the serial run, in input order."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest
from conftest import SAMPLES
from io_pipes import FifoWriter

from ctxtool.errors import CtxtoolError
from ctxtool.run import manyfiles, runner
from ctxtool.run.operation import Operation, Results, RunContext, Task
from ctxtool.stats.files import stats_files

CORPUS = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus"


class _PidTask(Task[Results[tuple[str, int]]]):
    def __init__(self, path: str) -> None:
        self.path = path
        self.n = 0

    def apply(self, t: object) -> None:
        self.n += 1

    def finish(self) -> Results[tuple[str, int]]:
        return Results([(os.path.basename(self.path), os.getpid())])


@dataclass(frozen=True)
class _Where(Operation[Results[tuple[str, int]]]):
    """Which process read each file."""

    name: ClassVar[str] = "where"
    writes: ClassVar[bool] = False

    def start(self, ctx: RunContext) -> Task[Results[tuple[str, int]]]:
        return _PidTask(ctx.path)


def _sessions(d: Path, n: int) -> list[str]:
    d.mkdir(parents=True, exist_ok=True)
    src = (SAMPLES / "claude_code_session.jsonl").read_bytes()  # 72 KB: 16 of them fill more than FILES_MIN_BYTES
    out = []
    for i in range(n):
        p = d / f"s{i:02}.jsonl"
        p.write_bytes(src)
        out.append(str(p))
    return out


def test_small_files_run_in_worker_processes_in_input_order(tmp_path: Path) -> None:
    files = _sessions(tmp_path / "a", 16)
    runs = list(manyfiles.run_files(_Where(), files, jobs=2))
    assert [name for r in runs for name, _ in r.report.items] == [os.path.basename(f) for f in files]
    pids = {pid for r in runs for _, pid in r.report.items}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2
    assert len(runs) < len(files)  # a job's files come back as one run, their reports merged in order
    serial = list(manyfiles.run_files(_Where(), files, jobs=1))
    assert {pid for r in serial for _, pid in r.report.items} == {os.getpid()}
    assert sum(r.transcripts for r in runs) == sum(r.transcripts for r in serial)


def test_a_fifo_between_small_files_is_read_here_in_its_turn(tmp_path: Path) -> None:
    first = _sessions(tmp_path / "a", 16)
    last = _sessions(tmp_path / "b", 16)
    fifo = tmp_path / "mid.jsonl"
    os.mkfifo(fifo)
    writer = FifoWriter(fifo, (SAMPLES / "pi_session.jsonl").read_bytes())
    try:
        runs = list(manyfiles.run_files(_Where(), [*first, str(fifo), *last], jobs=2))
    finally:
        writer.finish()
    names = [name for r in runs for name, _ in r.report.items]
    assert names == [os.path.basename(f) for f in first] + ["mid.jsonl"] + [os.path.basename(f) for f in last]
    by_name = {name: pid for r in runs for name, pid in r.report.items}
    assert by_name["mid.jsonl"] == os.getpid() and by_name["s00.jsonl"] != os.getpid()


def _tree(tmp_path: Path) -> Path:
    d = tmp_path / "mix"
    d.mkdir()
    for p in sorted(SAMPLES.iterdir()):
        if p.suffix in (".json", ".jsonl"):
            shutil.copy(p, d / p.name)
    if CORPUS.is_dir():
        for p in sorted(CORPUS.rglob("*.jsonl")):
            shutil.copy(p, d / f"corpus_{p.parent.name}_{p.name}")
    _sessions(d / "many", 12)
    (d / "m_broken.jsonl").write_text("garbage\n")
    return d


@pytest.mark.parametrize("tokenizer", ["heuristic", "o200k_base"])
def test_stats_over_many_files_equals_the_serial_run(tmp_path: Path, tokenizer: str) -> None:
    d = _tree(tmp_path)
    serial = stats_files([str(d)], tokenizer=tokenizer, on_error="skip", workers=1).to_json()
    rep = stats_files([str(d)], tokenizer=tokenizer, on_error="skip", workers=2)
    assert rep.to_json() == serial
    assert any("m_broken.jsonl" in s for s in rep.skipped)
    # streamed (--json's path): every transcript passed on once, in input order
    seen: list[str] = []
    streamed = stats_files([str(d)], tokenizer=tokenizer, on_error="skip", workers=2, each=lambda t: seen.append(t.label))
    assert seen == [t["transcript"] for t in serial["transcripts"]]
    assert streamed.to_json()["totals"] == serial["totals"]


def test_the_first_bad_file_stops_the_run_as_it_does_serially(tmp_path: Path) -> None:
    d = _tree(tmp_path)
    errors = []
    for workers in (1, 2):
        with pytest.raises(CtxtoolError) as e:
            stats_files([str(d)], workers=workers)
        errors.append(str(e.value))
    assert errors[0] == errors[1] and "m_broken.jsonl" in errors[0]


def test_each_result_on_every_core_equals_the_serial_run(tmp_path: Path) -> None:
    """check, cut and compactions read many files through manyfiles.each_result: a function
    that pickles (a functools.partial, with an exact tokenizer pickled by name) runs on the
    worker pool; its results reach the sink in the serial run's order, with the same
    skipped records and the same first error."""
    import functools

    from ctxtool.history.cut import cut_transcript
    from ctxtool.policies.check import check_transcript
    from ctxtool.stats.compactions import compactions
    from ctxtool.tokens.count import get_tokenizer

    d = _tree(tmp_path)
    files = [str(p) for p in sorted(d.rglob("*")) if p.is_file()]
    tok = get_tokenizer("o200k_base")
    tok.count("loaded here first: the workers load their own")
    for fn in (functools.partial(check_transcript, tokenizer=tok),
               functools.partial(cut_transcript, keep_recent_tokens=2000, tokenizer=tok)):
        got: dict[int, tuple[list[object], list[str]]] = {}
        for jobs in (1, 2):
            results: list[object] = []
            skipped = manyfiles.each_result(fn, files, results.append, on_error="skip", jobs=jobs)
            got[jobs] = ([r.to_json() for r in results], skipped)
        assert got[2] == got[1] and len(got[1][0]) > 30
        assert any("m_broken.jsonl" in s for s in got[1][1])
        errors = []
        for jobs in (1, 2):
            with pytest.raises(CtxtoolError) as e:
                manyfiles.each_result(fn, files, lambda r: None, jobs=jobs)
            errors.append(str(e.value))
        assert errors[0] == errors[1] and "m_broken.jsonl" in errors[0]
    good = [f for f in files if "m_broken" not in f]
    streamed: list[object] = []
    two = compactions(good, jobs=2, each=lambda t: streamed.append(t.to_json()))
    one = compactions(good, jobs=1)
    assert [t.to_json() for t in two.transcripts] == [t.to_json() for t in one.transcripts] == streamed
    assert two.totals == one.totals and len(streamed) > 30


def test_an_exact_tokenizer_pickles_by_name() -> None:
    import pickle

    from ctxtool.tokens.count import get_tokenizer

    tok = get_tokenizer("o200k_base")
    n = tok.count("an exact count, loaded in this process")
    again = pickle.loads(pickle.dumps(tok))
    assert again.name == "o200k_base" and again.count("an exact count, loaded in this process") == n


def test_a_long_session_runs_whole_on_a_worker_and_a_large_dataset_is_split(tmp_path: Path) -> None:
    """A file over PARALLEL_MIN_BYTES that run_file would not split (one long session) is a
    whole-file job like the small ones; a large dataset file still splits into byte ranges."""
    src = (SAMPLES / "claude_code_session.jsonl").read_bytes()
    reps = runner.PARALLEL_MIN_BYTES // len(src) + 1
    longs = []
    for i in range(2):
        p = tmp_path / f"long{i}.jsonl"
        p.write_bytes(src * reps)  # the same lines again and again, as a resumed session repeats them
        longs.append(str(p))
    runs = list(manyfiles.run_files(_Where(), longs, jobs=2))
    pids = {pid for r in runs for _, pid in r.report.items}
    assert [n for r in runs for n, _ in r.report.items] == ["long0.jsonl", "long1.jsonl"]
    assert os.getpid() not in pids
    assert manyfiles._whole_size(longs[0], None) == os.path.getsize(longs[0])
    rec = (SAMPLES / "openai_dataset.jsonl").read_bytes().splitlines(keepends=True)[0]
    ds = tmp_path / "ds.jsonl"
    ds.write_bytes(rec * (runner.PARALLEL_MIN_BYTES // len(rec) + 1))
    assert manyfiles._whole_size(str(ds), None) is None  # run_file splits it itself
    assert stats_files([*longs, str(ds)], workers=2).to_json() == stats_files([*longs, str(ds)], workers=1).to_json()


def test_validate_over_many_files_equals_the_serial_run(tmp_path: Path) -> None:
    """validate reads many local files on the pool, each file's run on its own
    (Operation.merge_files False): its schema problems (a canonical file, read again),
    structural problems and unreadable records in the serial run's order, a FIFO in the
    middle spooled and read here in its turn."""
    from ctxtool.formats import read, write_path
    from ctxtool.history.validate import validate

    d = _tree(tmp_path)
    t = next(read(str(SAMPLES / "claude_code_session.jsonl")))
    write_path([t], str(d / "canon.jsonl"), "ctxtool")
    lines = (d / "canon.jsonl").read_text("utf-8").splitlines()
    (d / "canon_bad.jsonl").write_text("\n".join([lines[0], '{"type": "message", "role": 7}', *lines[1:]]) + "\n")
    files = [str(p) for p in sorted(d.rglob("*")) if p.is_file()]
    fifo = tmp_path / "mid.jsonl"
    os.mkfifo(fifo)
    reports = []
    for jobs in (1, 2):
        writer = FifoWriter(fifo, (SAMPLES / "pi_session.jsonl").read_bytes())
        try:
            reports.append(validate([*files[:5], str(fifo), *files[5:]], jobs=jobs).to_json())
        finally:
            writer.finish()
    assert reports[0] == reports[1]
    kinds = {p["code"] for p in reports[0]["problems"]}
    assert {"schema", "unreadable"} <= kinds and reports[0]["files"] == len(files) + 1


def test_an_id_nested_as_deep_as_the_readers_accept_comes_back_from_a_worker(tmp_path: Path) -> None:
    """A transcript's id may be any JSON value a reader accepts, 1,000 levels deep: a
    worker's result is pickled with room for it (parallel._sent), whole files and byte
    ranges alike, and the report is the serial one (the bad-input suite's many-files mode
    found validate ending with a RecursionError)."""
    from ctxtool.history.validate import validate

    src = (SAMPLES / "codex_rollout.jsonl").read_text("utf-8")
    deep = "[" * 1000 + "]" * 1000
    text = src.replace('"id":"019a4f2c-7d31-7b90-a1c4-5e2f8b6d0e13"', '"id":' + deep, 1)
    assert text != src
    files = []
    for i in range(70):  # 16 KB each: more than FILES_MIN_BYTES
        p = tmp_path / f"r{i:02}.jsonl"
        p.write_text(text, "utf-8")
        files.append(str(p))
    from ctxtool.io.jsontext import encode  # the reports as JSON text: == would recurse 1,000 levels

    assert encode(validate(files, jobs=2).to_json()) == encode(validate(files, jobs=1).to_json())
    assert encode(stats_files(files, workers=2).to_json()) == encode(stats_files(files, workers=1).to_json())
