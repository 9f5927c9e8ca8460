"""Inputs that are not plain files: FIFOs and /dev/fd/N for every command, gzip and zstd by
magic bytes, a UTF-8 byte order mark, JSON documents whose errors name a line."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import zstandard
from io_pipes import FILE_COMMANDS, SAMPLES, FifoWriter, command_args, pipe_writer, run_ctxtool
from typer.testing import CliRunner

from ctxtool import formats
from ctxtool.cli import COMMANDS, app
from ctxtool.cli.exits import ExitCode
from ctxtool.io import jsonl as jsonio
from ctxtool.io.files import open_input, splittable

PI = SAMPLES / "pi_session.jsonl"
runner = CliRunner()

# commands that read no transcript file
NOT_FILE_COMMANDS = {"formats", "models", "config", "refs", "instructions", "mcp"}


def test_the_table_covers_every_command_that_reads_a_file() -> None:
    assert set(FILE_COMMANDS) == set(COMMANDS) - NOT_FILE_COMMANDS


def _input_for(name: str, tmp_path: Path) -> Path:
    """The pi sample; validate gets it as a canonical file (its schema check reads twice)."""
    if name != "validate":
        return PI
    canon = tmp_path / "canonical.jsonl"
    with canon.open("wb") as fh:
        formats.write(formats.read(PI), fh, "ctxtool")
    return canon


@pytest.mark.parametrize("name", sorted(FILE_COMMANDS))
def test_every_command_reads_a_fifo(name: str, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("CTXTOOL_CACHE_DIR", str(tmp_path / "c"))
    src = _input_for(name, tmp_path)
    plain = runner.invoke(app, command_args(name, src, tmp_path / "plain.out"))  # the same, from a file
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    writer = FifoWriter(fifo, src.read_bytes())
    try:
        r = run_ctxtool(*command_args(name, fifo, tmp_path / "fifo.out"), cache=tmp_path / "c", timeout=30)
    finally:
        writer.finish()
    err = r.stderr.decode()
    assert r.returncode == plain.exit_code, err
    assert r.returncode in (0, ExitCode.THRESHOLD), err
    assert "internal error" not in err and "not a file" not in err
    if (tmp_path / "plain.out").exists() and name not in ("compact", "archive"):
        assert (tmp_path / "fifo.out").read_bytes() == (tmp_path / "plain.out").read_bytes()


def test_process_substitution_dev_fd_input(tmp_path: Path) -> None:
    rfd, wfd = os.pipe()
    t = pipe_writer(wfd, PI.read_bytes())
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "ctxtool", "truncate", f"/dev/fd/{rfd}", "--max-lines", "2", "-o", str(tmp_path / "o.jsonl")],
            pass_fds=(rfd,), capture_output=True, timeout=60, check=False,
            env={**os.environ, "CTXTOOL_CACHE_DIR": str(tmp_path / "c")},
        )
    finally:
        os.close(rfd)
        t.join(5)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "o.jsonl").stat().st_size > 0


def _gz(data: bytes) -> bytes:
    return gzip.compress(data)


def _zst(data: bytes) -> bytes:
    return zstandard.ZstdCompressor().compress(data)


@pytest.mark.parametrize("packer", [_gz, _zst], ids=["gzip", "zstd"])
@pytest.mark.parametrize("sample", ["pi_session.jsonl", "openai_chat.json", "openai_dataset.jsonl"])
def test_compressed_inputs_are_detected_by_magic_bytes(packer, sample: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    plain = SAMPLES / sample
    packed = tmp_path / f"named-plain{plain.suffix}"  # the name says nothing about compression
    packed.write_bytes(packer(plain.read_bytes()))
    a = runner.invoke(app, ["stats", str(plain), "--json"])
    b = runner.invoke(app, ["stats", str(packed), "--json"])
    assert a.exit_code == b.exit_code == 0, b.output
    assert json.loads(a.stdout)["totals"] == json.loads(b.stdout)["totals"]
    out = tmp_path / "out"
    c = runner.invoke(app, ["convert", str(packed), "--to", formats.detect(jsonio.open_source(plain)).name, "-o", str(out)])
    assert c.exit_code == 0, c.output
    assert out.read_bytes() == plain.read_bytes()
    # stdin too
    d = runner.invoke(app, ["stats", "-", "--json"], input=packer(plain.read_bytes()))
    assert d.exit_code == 0 and json.loads(d.stdout)["totals"] == json.loads(a.stdout)["totals"]


def test_a_compressed_file_is_never_split_in_byte_ranges(tmp_path: Path) -> None:
    plain = SAMPLES / "openai_dataset.jsonl"
    packed = tmp_path / "dataset.jsonl"
    packed.write_bytes(_gz(plain.read_bytes()))
    assert splittable(plain) and not splittable(packed)
    assert formats.split_plan(str(plain), None, 4, 0) is not None
    assert formats.split_plan(str(packed), None, 4, 0) is None


def test_corrupt_compressed_data_is_bad_input_naming_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(_gz(PI.read_bytes())[:-40] + b"\x00" * 10)
    r = runner.invoke(app, ["stats", str(bad)])
    assert r.exit_code == ExitCode.INPUT, r.output
    assert str(bad) in r.stderr and "internal error" not in r.stderr


@pytest.mark.parametrize("name", sorted(FILE_COMMANDS))
@pytest.mark.parametrize("sample", ["pi_session.jsonl", "openai_chat.json"])
def test_a_byte_order_mark_is_read_by_every_command(name: str, sample: str, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("CTXTOOL_CACHE_DIR", str(tmp_path / "c"))
    src = SAMPLES / sample if name != "validate" else _input_for(name, tmp_path)
    bom = tmp_path / f"bom{src.suffix}"
    bom.write_bytes(b"\xef\xbb\xbf" + src.read_bytes())
    a = runner.invoke(app, command_args(name, src, tmp_path / "a.out"))
    b = runner.invoke(app, command_args(name, bom, tmp_path / "b.out"))
    assert b.exit_code == a.exit_code, b.output
    assert "internal error" not in b.stderr
    if name == "convert":
        assert (tmp_path / "a.out").read_bytes() == (tmp_path / "b.out").read_bytes()


def test_a_byte_order_mark_on_stdin() -> None:
    r = runner.invoke(app, ["stats", "-", "--json"], input=b"\xef\xbb\xbf" + PI.read_bytes())
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["totals"]["messages"] > 0


def test_open_input_strips_the_bom_only_at_the_start(tmp_path: Path) -> None:
    p = tmp_path / "x.jsonl"
    p.write_bytes(b"\xef\xbb\xbf{}\n\xef\xbb\xbf\n")
    with open_input(p) as fh:
        assert fh.read() == b"{}\n\xef\xbb\xbf\n"


def test_a_json_document_error_names_its_line(tmp_path: Path) -> None:
    doc = tmp_path / "chat.json"
    doc.write_text('[\n\n  {"role": "user",\n\n   "content": "hi"},\n  {"role": "assistant" "content": "x"}\n]\n')
    r = runner.invoke(app, ["stats", str(doc)])
    assert r.exit_code == ExitCode.INPUT, r.output
    assert f"{doc}:6:" in r.stderr, r.stderr  # the line, counting blank lines


def test_invalid_utf8_in_a_json_document_names_its_line(tmp_path: Path) -> None:
    doc = tmp_path / "chat.json"
    doc.write_bytes(b'[\n  {"role": "user",\n   "content": "h\xffi"}\n]\n')
    r = runner.invoke(app, ["stats", str(doc)])
    assert r.exit_code == ExitCode.INPUT, r.output
    assert f"{doc}:3:" in r.stderr, r.stderr


def test_validate_reads_a_compressed_canonical_file_twice(tmp_path: Path) -> None:
    canon = _input_for("validate", tmp_path)
    packed = tmp_path / "canonical.jsonl.zst"
    packed.write_bytes(_zst(b"\xef\xbb\xbf" + canon.read_bytes()))
    r = runner.invoke(app, ["validate", str(packed)])
    assert r.exit_code == 0, r.output
    assert "no problems" in r.stdout


def test_detection_reads_ahead_a_bounded_number_of_bytes(tmp_path: Path) -> None:
    """Format detection parses up to PEEK_LINES lines ahead, but stops after PEEK_BYTES (at
    least PEEK_MIN_LINES lines): a split run's parent would otherwise parse megabytes of a
    dataset of big records before its workers start. Every line is still read, in order."""
    big = "x" * (300 << 10)
    f = tmp_path / "big.jsonl"
    f.write_text("".join(json.dumps({"id": str(i), "messages": [{"role": "user", "content": big}]}) + "\n"
                         for i in range(40)))
    src = jsonio.open_source(str(f))
    assert len(src.peek) == jsonio.PEEK_MIN_LINES < 40
    assert formats.detect(src).name == "openai"
    assert [ln.obj["id"] for ln in src.lines()] == [str(i) for i in range(40)]
    small = tmp_path / "small.jsonl"
    small.write_text("".join(json.dumps({"id": str(i), "messages": [{"role": "user", "content": "hi"}]}) + "\n"
                             for i in range(100)))
    src = jsonio.open_source(str(small))
    assert len(src.peek) == jsonio.PEEK_LINES
    src.close()
