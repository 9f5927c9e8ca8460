"""A file written back keeps how its source ended its bytes: a UTF-8 byte order mark, ``\\r\\n``
lines, no final newline. The readers take all three off, so before this a command that changed
nothing (``convert`` to the same format, ``truncate`` with nothing to cut) still changed the file,
and one that changed a line rewrote every line ending. Through the CLI, every sample in each of
the three variants; a change made, then restored; a pipe; a dataset on two processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SAMPLES, sample_files

BOM = b"\xef\xbb\xbf"


def variants(data: bytes) -> dict[str, bytes]:
    lf = data if data.endswith(b"\n") else data + b"\n"
    return {"bom": BOM + lf, "crlf": lf.replace(b"\n", b"\r\n"), "no-final-newline": lf[:-1],
            "crlf-no-final-newline": lf.replace(b"\n", b"\r\n")[:-2]}


def run(tmp_path: Path, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    r = subprocess.run([sys.executable, "-m", "ctxtool", *args], capture_output=True, input=stdin, cwd=tmp_path,
                       env={"CTXTOOL_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin",
                            "CTXTOOL_CONFIG_DIR": str(tmp_path / "config")})
    assert r.returncode == 0, r.stderr.decode()
    return r


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
