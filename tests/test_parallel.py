"""Large dataset files are split across processes: the results must equal the serial run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxtool.errors import CtxtoolError
from ctxtool.io import jsonl as jsonio
from ctxtool.stats.files import stats_files
from ctxtool.tool_outputs import algorithms as toolout
from ctxtool.tool_outputs import files as tools_ops


def _dataset(path: Path, n: int = 40) -> Path:
    lines = []
    for i in range(n):
        msgs = [
            {"role": "system", "content": "agent"},
            {"role": "user", "content": f"task {i}"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": "\n".join(f"line {k} of output {i}" for k in range(300 + i))},
            {"role": "assistant", "content": f"done {i}"},
        ]
        lines.append(json.dumps({"id": f"r{i}", "messages": msgs, "score": i}))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    return _dataset(tmp_path / "ds.jsonl")


def test_stats_parallel_equals_serial(dataset: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    serial = stats_files([str(dataset)], workers=1).to_json()
    parallel = stats_files([str(dataset)], workers=2).to_json()
    assert parallel == serial
    assert [t["id"] for t in parallel["transcripts"]] == [f"r{i}" for i in range(40)]
    exact = stats_files([str(dataset)], workers=2, tokenizer="o200k_base").to_json()
    assert exact == stats_files([str(dataset)], workers=1, tokenizer="o200k_base").to_json()


def test_blank_lines_do_not_shift_record_indices(dataset: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = dataset.read_text().splitlines()
    dataset.write_text("\n".join(ln + ("\n" if i % 7 == 3 else "") for i, ln in enumerate(lines)) + "\n")
    serial = stats_files([str(dataset)], workers=1).to_json()
    parallel = stats_files([str(dataset)], workers=2).to_json()
    assert parallel == serial
    by_line = {t["id"]: t["index"] for t in serial["transcripts"]}
    text = dataset.read_text().split("\n")
    assert all(f'"id": "{rid}"' in text[i] for rid, i in by_line.items())  # index = 0-based line


def test_truncate_parallel_equals_serial_and_restores(dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lim = toolout.Limits(max_lines=50)
    a = tools_ops.truncate_file(str(dataset), str(tmp_path / "a.jsonl"), limits=lim, cache=tmp_path / "ca", events=tmp_path / "ea.jsonl", jobs=1)
    b = tools_ops.truncate_file(str(dataset), str(tmp_path / "b.jsonl"), limits=lim, cache=tmp_path / "cb", events=tmp_path / "eb.jsonl", jobs=2)
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert (tmp_path / "ea.jsonl").read_bytes() == (tmp_path / "eb.jsonl").read_bytes()
    ja, jb = a.to_json(), b.to_json()
    ja.pop("output"), jb.pop("output")
    assert ja == jb and b.truncated == 40
    assert not list(tmp_path.glob(".ctxtool-parts-*"))  # no part files left behind
    tools_ops.restore_file(str(tmp_path / "b.jsonl"), str(tmp_path / "back.jsonl"), cache=tmp_path / "cb")
    assert (tmp_path / "back.jsonl").read_bytes() == dataset.read_bytes()  # byte for byte, in the source's style


def test_workers_number_lines_like_the_serial_reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Record indices, names of records without an id, line numbers of outputs and rows, and
    error lines come out of the workers as in a serial run (blank lines and a broken record
    in the second half included; under --on-error skip the records after it are read)."""
    src = _dataset(tmp_path / "ds.jsonl")
    lines = src.read_text().splitlines()
    recs = [json.loads(x) for x in lines]
    for r in recs:
        del r["id"]  # named by index
    body = [json.dumps(r) for r in recs]
    body.insert(3, "")
    body.insert(30, "{not json")
    src.write_text("\n".join(body) + "\n\n")
    serial = stats_files([str(src)], workers=1, on_error="skip", per_message=True)
    parallel = stats_files([str(src)], workers=2, on_error="skip", per_message=True)
    assert parallel.to_json() == serial.to_json()
    assert parallel.rows == serial.rows
    assert parallel.skipped == serial.skipped and ":31:" in parallel.skipped[0]
    assert [t.index for t in parallel.transcripts][-1] == len(body) - 1
    with pytest.raises(CtxtoolError) as serial_err:
        stats_files([str(src)], workers=1)
    with pytest.raises(CtxtoolError) as parallel_err:
        stats_files([str(src)], workers=2)
    assert str(parallel_err.value) == str(serial_err.value) and parallel_err.value.line == 31


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.tuples(st.integers(0, 3000), st.sampled_from([b"\n", b"\r\n", b""])), max_size=60),
    st.data(),
)
def test_newlines_counted_in_place_equal_the_read_count(tmp_path: Path, lines: list[tuple[int, bytes]], data: st.DataObject) -> None:
    """count_newlines maps a local file and jumps from newline to newline (long lines) or
    counts a megabyte at once (short ones): the same count as reading the range, for any
    range, with runs of short lines past the jump limit."""
    body = b"".join(b"x" * n + end for n, end in lines) + b"\n" * data.draw(st.integers(0, 200))
    p = tmp_path / "nl.jsonl"
    p.write_bytes(body)
    a = data.draw(st.integers(0, len(body)))
    b = data.draw(st.integers(a, len(body)))
    assert jsonio.count_newlines(str(p), a, b) == body[a:b].count(b"\n")


def test_newlines_counted_across_megabytes(tmp_path: Path) -> None:
    p = tmp_path / "big.jsonl"
    body = (b"y" * 70_000 + b"\n") * 40 + b"\n" * 150_000 + b"z" * (3 << 20) + b"\n"
    p.write_bytes(body)
    for a, b in [(0, len(body)), (12345, len(body) - 7), (1 << 20, 3 << 20), (5, 5)]:
        assert jsonio.count_newlines(str(p), a, b) == body[a:b].count(b"\n")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from([b"", b" ", b"{}", b'{"a": 1}', b"\t\r", b"x" * 3000]),
                          st.sampled_from([b"\n", b"\r\n", b"\r\r\n", b"\r", b""])), max_size=12))
def test_a_pipe_and_a_file_give_the_same_lines(tmp_path: Path, parts: list[tuple[bytes, bytes]]) -> None:
    """jsonio._numbered reads a file and a pipe with one loop: same lines, numbers and
    line-ending rule (one "\\n" or "\\r\\n" removed, or a "\\r" that ends the input)."""
    import io
    import os
    import threading

    body = b"".join(a + b for a, b in parts)
    p = tmp_path / "lines.jsonl"
    p.write_bytes(body)
    ends_file: list[bool] = []
    with open(p, "rb", buffering=1 << 20) as fh:
        from_file = list(jsonio._numbered(fh, ends=ends_file))
    r, w = os.pipe()
    t = threading.Thread(target=lambda: (os.write(w, body) if body else None, os.close(w)))
    t.start()
    ends_pipe: list[bool] = []
    with io.BufferedReader(io.FileIO(r, "rb")) as fh:
        from_pipe = list(jsonio._numbered(fh, ends=ends_pipe))
    t.join()
    assert from_pipe == from_file and ends_pipe == ends_file
    expected = []
    for n, line in enumerate(body.split(b"\n") if body else [], 1):
        if n == len(body.split(b"\n")) and not line:
            break
        s = line[:-1] if line.endswith(b"\r") else line
        if s.strip():
            expected.append((n, s))
    assert from_file == expected
