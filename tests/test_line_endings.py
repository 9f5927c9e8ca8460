"""A file written back keeps how its source ended its bytes: a UTF-8 byte order mark, ``\\r\\n``
lines, no final newline. The readers take all three off, so before this a command that changed
nothing (``convert`` to the same format, ``truncate`` with nothing to cut) still changed the file,
and one that changed a line rewrote every line ending. Through the CLI, every sample in each of
the three variants; a change made, then restored; a pipe; a dataset on two processes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import SAMPLES, sample_files
from io_pipes import ctxtool_ok

BOM = b"\xef\xbb\xbf"


def variants(data: bytes) -> dict[str, bytes]:
    lf = data if data.endswith(b"\n") else data + b"\n"
    return {"bom": BOM + lf, "crlf": lf.replace(b"\n", b"\r\n"), "no-final-newline": lf[:-1],
            "crlf-no-final-newline": lf.replace(b"\n", b"\r\n")[:-2]}


def run(tmp_path: Path, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return ctxtool_ok(*args, cache=tmp_path / "cache", cwd=tmp_path, input=stdin)


def fmt_of(tmp_path: Path, p: Path) -> str:
    return str(json.loads(run(tmp_path, "formats", "--json", str(p)).stdout)["files"][0]["format"])


@pytest.mark.parametrize("kind", ["bom", "crlf", "no-final-newline", "crlf-no-final-newline"])
@pytest.mark.parametrize("sample", sample_files(), ids=lambda p: p.name)
def test_written_back_as_the_source_ends(tmp_path: Path, sample: Path, kind: str) -> None:
    src = tmp_path / sample.name
    src.write_bytes(variants(sample.read_bytes())[kind])
    fmt = fmt_of(tmp_path, src)
    same = tmp_path / "same"
    run(tmp_path, "convert", str(src), "--to", fmt, "-o", str(same))
    assert same.read_bytes() == src.read_bytes()  # nothing changed: not one byte
    cut, back = tmp_path / "cut", tmp_path / "back"
    run(tmp_path, "truncate", str(src), "--max-lines", "2", "--max-bytes", "120", "-o", str(cut))
    out, data = cut.read_bytes(), src.read_bytes()
    assert out.startswith(BOM) == data.startswith(BOM)
    assert (b"\r\n" in out) == (b"\r\n" in data)
    if b"\r\n" in data:
        assert b"\n" not in out.replace(b"\r\n", b"")  # every line
    assert out.endswith(b"\n") == data.endswith(b"\n")
    run(tmp_path, "restore", str(cut), "-o", str(back))
    assert back.read_bytes() == src.read_bytes()


def test_a_pipe_keeps_its_endings(tmp_path: Path) -> None:
    data = variants((SAMPLES / "claude_code_session.jsonl").read_bytes())["crlf-no-final-newline"]
    assert run(tmp_path, "convert", "-", "--to", "claude-code", stdin=data).stdout == data
    assert run(tmp_path, "window", "-", "--max-chars", "10000000", stdin=data).stdout == data


def test_a_dataset_on_two_processes_keeps_its_endings(tmp_path: Path) -> None:
    """A dataset is cut into byte ranges for parallel workers only when its ending is the one
    they write (\\n lines, a final newline, no mark); another is rewritten whole by one process."""
    rec = (SAMPLES / "openai_dataset.jsonl").read_bytes()
    for kind, data in variants(rec * 200).items():
        src = tmp_path / f"{kind}.jsonl"
        src.write_bytes(data)
        one, two = tmp_path / f"{kind}-1.jsonl", tmp_path / f"{kind}-2.jsonl"
        run(tmp_path, "window", str(src), "--max-chars", "400", "-j", "1", "-o", str(one))
        run(tmp_path, "window", str(src), "--max-chars", "400", "-j", "2", "-o", str(two))
        assert one.read_bytes() == two.read_bytes() != data
        assert one.read_bytes().count(b"\r\n") == data.count(b"\r\n")  # every line's ending, or none
        assert one.read_bytes().startswith(BOM) == (kind == "bom")


def test_a_joined_output_of_differently_ended_inputs_is_plain_json_lines(tmp_path: Path) -> None:
    """--join puts the outputs of several inputs in one file: each part is written in plain \\n
    lines (before: a part without a final newline was glued to the next, a mark mid-file)."""
    d = (SAMPLES / "openai_dataset.jsonl").read_bytes()
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_bytes(d.rstrip(b"\n"))
    (tmp_path / "in" / "b.jsonl").write_bytes(BOM + d.replace(b"\n", b"\r\n"))
    out = tmp_path / "joined.jsonl"
    run(tmp_path, "window", str(tmp_path / "in"), "--max-chars", "400", "--join", "-o", str(out))
    data = out.read_bytes()
    assert BOM not in data and b"\r" not in data and data.endswith(b"\n")
    assert len([json.loads(x) for x in data.splitlines()]) == 2 * d.count(b"\n")


@pytest.mark.parametrize("shape", ["crlf-but-last-lf", "first-crlf-only", "lf-but-last-crlf"])
def test_mixed_endings_give_one_answer_on_one_or_two_processes(tmp_path: Path, shape: str) -> None:
    """Which ending a file's lines get is one rule (its first line's), asked by the writer and by
    the choice to cut the file into ranges: -j 2 writes what -j 1 does."""
    lines = (SAMPLES / "openai_dataset.jsonl").read_bytes().splitlines(keepends=True) * 100
    if shape == "crlf-but-last-lf":
        data = b"".join(x.replace(b"\n", b"\r\n") for x in lines[:-1]) + lines[-1]
    elif shape == "first-crlf-only":
        data = lines[0].replace(b"\n", b"\r\n") + b"".join(lines[1:])
    else:
        data = b"".join(lines[:-1]) + lines[-1].replace(b"\n", b"\r\n")
    src = tmp_path / "mixed.jsonl"
    src.write_bytes(data)
    one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    run(tmp_path, "window", str(src), "--max-chars", "400", "-j", "1", "-o", str(one))
    run(tmp_path, "window", str(src), "--max-chars", "400", "-j", "2", "-o", str(two))
    assert one.read_bytes() == two.read_bytes()


def test_blank_space_after_the_last_line_is_not_a_missing_newline(tmp_path: Path) -> None:
    """A file ending "}\\n  " ended its last line with a newline: written back with it."""
    line = (SAMPLES / "openai_dataset.jsonl").read_bytes().splitlines(keepends=True)[0]
    for tail, want in ((b"  ", b"\n"), (b"\n\n \t", b"\n"), (b"", b"\n")):
        src = tmp_path / "ws.jsonl"
        src.write_bytes(line + tail)
        out = tmp_path / "out.jsonl"
        run(tmp_path, "convert", str(src), "--to", "openai", "-o", str(out))
        assert out.read_bytes() == line.rstrip(b"\n") + want
        assert run(tmp_path, "convert", "-", "--to", "openai", stdin=line + tail).stdout == line.rstrip(b"\n") + want
