"""``stats(keep=K)``: only the K transcripts with the most context tokens are held (what the
table shows), while the totals, threshold counts, models and timestamps still count every
transcript: the same report as keeping them all, in flat memory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import all_transcript_params
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxtool.stats.figures import Figures, StatsReport, most_context
from ctxtool.stats.files import stats_files
from ctxtool.stats.op import StatsPart


def record(i: int, size: int, model: str | None = None, ts: str | None = None) -> dict[str, Any]:
    user: dict[str, Any] = {"role": "user", "content": "q" * size}
    rec: dict[str, Any] = {"id": f"r{i}", "messages": [user, {"role": "assistant", "content": "a"}]}
    if model:
        rec["model"] = model
    if ts:
        user["timestamp"] = ts
    return rec


def write(tmp: Path, sizes: list[int], **kw: Any) -> str:
    p = tmp / "d.jsonl"
    p.write_text("".join(json.dumps(record(i, s, **kw)) + "\n" for i, s in enumerate(sizes)))
    return str(p)


def without_transcripts(report: StatsReport) -> dict[str, Any]:
    d = report.to_json(transcripts=False)
    return d


def check_keep(path: str, k: int, **kw: Any) -> None:
    full = stats_files([path], **kw)
    kept = stats_files([path], keep=k, **kw)
    assert without_transcripts(kept) == without_transcripts(full)
    assert kept.count == full.count == len(full.transcripts)
    assert kept.level == full.level
    if full.count > k:
        want = sorted(full.transcripts, key=lambda x: -x.context_tokens)[:k]  # the table's rule
    else:
        want = full.transcripts
    assert [t.to_json() for t in kept.transcripts] == [t.to_json() for t in want]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.sampled_from([1, 5, 40, 400, 450_000]), min_size=1, max_size=40), k=st.integers(1, 7))
def test_keep_equals_sorting_them_all(tmp_path: Path, sizes: list[int], k: int) -> None:
    # many equal sizes: the earlier of equal transcripts must win, as a stable sort of all of them
    check_keep(write(tmp_path, sizes), k, workers=1)


def test_keep_across_processes(tmp_path: Path) -> None:
    sizes = [(i * 7919) % 50 * 100 for i in range(400)]
    path = write(tmp_path, sizes)
    check_keep(path, 5, workers=2)
    serial = stats_files([path], keep=5, workers=1)
    split = stats_files([path], keep=5, workers=3)
    assert [t.to_json() for t in split.transcripts] == [t.to_json() for t in serial.transcripts]
    assert without_transcripts(split) == without_transcripts(serial)


def test_keep_counts_models_and_timestamps_of_all(tmp_path: Path) -> None:
    p = tmp_path / "m.jsonl"
    recs = [record(0, 10, model="gpt-4o", ts="2026-01-02T00:00:00Z"), record(1, 5000, model="gpt-4.1", ts="2025-12-31T00:00:00Z"),
            record(2, 3, ts="2026-03-01T00:00:00Z")]
    p.write_text("".join(json.dumps(r) + "\n" for r in recs))
    kept = stats_files([str(p)], keep=1, workers=1)
    d = kept.to_json(transcripts=False)
    assert d["models"] == stats_files([str(p)], workers=1).to_json()["models"]
    assert d["totals"]["transcripts"] == 3 and len(kept.transcripts) == 1
    assert kept.transcripts[0].id == "r1"
    full = stats_files([str(p)], workers=1).to_json()
    assert (d["first_timestamp"], d["last_timestamp"]) == (full["first_timestamp"], full["last_timestamp"])


def test_a_part_holds_at_most_twice_keep() -> None:
    part = StatsPart(Figures(), [], [], [], None, keep=3)
    full = stats_files([str(Path(__file__).parent.parent / "samples" / "openai_dataset.jsonl")], workers=1)
    seen = 0
    for _ in range(50):
        for t in full.transcripts:
            part.add(t)
            seen += 1
            assert len(part.transcripts) <= 2 * 3
    assert part.overview.count == seen
    assert part.kept() == most_context(full.transcripts * 50, 3)


@pytest.mark.parametrize("path", all_transcript_params())
def test_keep_on_every_file(path: Path) -> None:
    check_keep(str(path), 2, on_error="skip", workers=1)


@pytest.mark.parametrize("workers", [1, 3])
def test_each_streams_every_transcript_in_order_holding_none(tmp_path: Path, workers: int) -> None:
    path = write(tmp_path, [(i * 37) % 11 * 50 + 1 for i in range(300)])
    full = stats_files([path], workers=workers)
    seen: list[dict[str, Any]] = []
    streamed = stats_files([path], workers=workers, each=lambda t: seen.append(t.to_json()))
    assert seen == [t.to_json() for t in full.transcripts]
    assert streamed.transcripts == [] and streamed.count == 300
    assert without_transcripts(streamed) == without_transcripts(full)


def test_each_over_several_files_and_skipped_records(tmp_path: Path) -> None:
    a = write(tmp_path, [3, 1, 2])
    b = tmp_path / "b.jsonl"
    b.write_text(json.dumps(record(9, 4)) + "\nnot json\n" + json.dumps(record(10, 5)) + "\n")
    full = stats_files([a, str(b)], on_error="skip", workers=1)
    seen: list[str] = []
    streamed = stats_files([a, str(b)], on_error="skip", workers=1, each=lambda t: seen.append(t.label))
    assert seen == [t.label for t in full.transcripts] and len(seen) == 5
    assert streamed.skipped == full.skipped and streamed.skipped


def test_output_lines_are_counted_when_first_read() -> None:
    """An output made with its text counts its lines when they are first read (most never
    are): the same value for every reader (the field, equality, repr, to_json, pickling,
    dataclasses), and the text let go; a count set wins over a text not counted yet."""
    import dataclasses
    import pickle

    from ctxtool.stats.figures import ToolOutput

    def made() -> ToolOutput:
        return ToolOutput("t", "m1", 3, "bash", 5, 11, 0, "a\nb\nc")

    counted = ToolOutput("t", "m1", 3, "bash", 5, 11, 3)
    assert made().lines == 3 and made() == counted and repr(made()) == repr(counted)
    assert made().to_json() == counted.to_json() and dataclasses.asdict(made())["lines"] == 3
    assert pickle.loads(pickle.dumps(made())) == counted
    o = made()
    assert o.text is not None and o.counted() is o and o.text is None and o.lines == 3
    o = made()
    o.lines = 7
    assert o.lines == 7 and o.text is None


def test_transcript_stats_reports_line_counts_of_its_outputs() -> None:
    """transcript_stats leaves its outputs' lines to be counted when read: what a reader gets
    is each output's own line count."""
    from ctxtool.formats import read_source
    from ctxtool.io.jsonl import open_source
    from ctxtool.stats.transcript import transcript_stats
    from ctxtool.tokens.count import get_tokenizer

    root = Path(__file__).resolve().parent.parent
    t = next(iter(read_source(open_source(root / "samples" / "openai_dataset.jsonl"))))
    texts = {b.text for m in t.messages for b in m.content if b.type == "tool_result"}
    s = transcript_stats(t, None, get_tokenizer("heuristic"))
    assert s.largest and all(o.lines == next(x.count("\n") + 1 for x in texts if len(x) == o.chars) for o in s.largest)


@settings(max_examples=30, deadline=None)
@given(cuts=st.lists(st.integers(0, 40), max_size=4), k=st.integers(0, 6), reps=st.integers(1, 6))
def test_a_pickled_part_sends_only_what_it_can_report(cuts: list[int], k: int, reps: int) -> None:
    """A worker's part crosses as its ``keep`` with most context (their outputs' lines counted,
    the others' not): merged, the parts report what the unpickled parts would (ties included)."""
    import pickle

    full = stats_files([str(Path(__file__).parent.parent / "samples" / "openai_dataset.jsonl")], workers=1)
    ts = [t for _ in range(reps) for t in full.transcripts]
    bounds = [0, *sorted(c % (len(ts) + 1) for c in cuts), len(ts)]
    parts = []
    for a, b in zip(bounds, bounds[1:], strict=False):
        p = StatsPart(Figures(), [], [], [], None, keep=k)
        for t in ts[a:b]:
            p.add(t)
        parts.append(p)
    sent = [pickle.loads(pickle.dumps(p)) for p in parts]
    assert all(len(s.transcripts) <= k for s in sent)
    direct, merged = StatsPart(Figures(), [], [], [], None, keep=k), StatsPart(Figures(), [], [], [], None, keep=k)
    for p, s in zip(parts, sent, strict=True):
        direct.merge(p)
        merged.merge(s)
    want = most_context(ts, k) if len(ts) > k else ts  # the table's rule (all, in input order, when no more than k)
    assert [t.to_json() for t in merged.kept()] == [t.to_json() for t in direct.kept()] == [t.to_json() for t in want]
    assert merged.totals.to_json() == direct.totals.to_json() and merged.overview == direct.overview
