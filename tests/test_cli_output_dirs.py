"""Outputs and the names they are given: an output directory that cannot be made (a parent that
is a file) is an output error naming it, exit 8, one line (before, export's pages and index and
redact's copies ended with exit 1, "internal error: NotADirectoryError"); a file output named as
a directory (``-o new/``) and an event log no file can hold are refused before the run; export
puts nothing on stdout for an input that holds no transcript."""

from __future__ import annotations

from pathlib import Path

import pytest
from io_pipes import SAMPLES, run_ctxtool

from ctxtool.cli.exits import ExitCode

CHAT, PI = str(SAMPLES / "openai_chat.json"), str(SAMPLES / "pi_session.jsonl")


@pytest.mark.parametrize(("args", "into"), [
    (["export", CHAT], "pages"),  # one session as HTML pages
    (["export", str(SAMPLES)], "index"),  # many sessions and their index
    (["redact", CHAT, PI], "copies"),  # several inputs into a directory
    (["redact", str(SAMPLES)], "tree"),  # a directory's files
    (["truncate", str(SAMPLES)], "shards"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_an_output_directory_that_cannot_be_made_is_an_output_error(tmp_path: Path, args: list[str], into: str) -> None:
    (tmp_path / "file").write_text("x")
    target = tmp_path / "file" / into
    r = run_ctxtool(*args, "-o", f"{target}/", cache=tmp_path / "c")
    assert r.returncode == ExitCode.IO, r.stderr
    err = r.stderr.decode()
    assert err.startswith(f"ctxtool: error: {target}") and "cannot write the output" in err, err
    assert len(err.splitlines()) == 1 and r.stdout == b""


@pytest.mark.parametrize("args", [["cut", CHAT], ["score", CHAT, CHAT], ["compactions", CHAT], ["stats", CHAT],
                                  ["convert", "--to", "openai", "--join", CHAT]],
                         ids=lambda v: v[0])
def test_an_output_file_named_as_a_directory_is_refused(tmp_path: Path, args: list[str]) -> None:
    """``-o new/``: before, a file named ``new`` was written (the slash dropped)."""
    r = run_ctxtool(*args, "-o", f"{tmp_path}/new/", cache=tmp_path / "c")
    assert r.returncode == ExitCode.USAGE, r.stderr
    assert "it names a directory" in r.stderr.decode() and r.stdout == b""
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("events", ["dir", "new/"])
@pytest.mark.parametrize("command", [["truncate", "--preset", "head-tail"], ["archive", "-n", "0"],
                                     ["compact", "--force", "-k", "100"]], ids=lambda v: v[0])
def test_an_event_log_no_file_can_hold_is_refused_before_the_run(tmp_path: Path, command: list[str], events: str) -> None:
    """The event log is written after the transcript: before, ``--events DIR`` failed (exit 2)
    with the transcript written."""
    (tmp_path / "dir").mkdir()
    out = tmp_path / "out.json"
    r = run_ctxtool(*command, CHAT, "--events", f"{tmp_path}/{events}", "-o", str(out), cache=tmp_path / "c")
    assert r.returncode == ExitCode.USAGE, r.stderr
    assert "cannot write the output" in r.stderr.decode()
    assert not out.exists() and not (tmp_path / "new").exists()


@pytest.mark.parametrize("to", ["markdown", "html"])
@pytest.mark.parametrize("content", [b"", b"not json\n", b"[]\n"], ids=["empty", "text", "no-transcript"])
def test_export_of_no_transcript_writes_nothing_on_stdout(tmp_path: Path, to: str, content: bytes) -> None:
    """Before, the document's head (``# name`` or the HTML head, 5 KB) was on stdout ahead of the
    error, exit 3."""
    src = tmp_path / "in.jsonl"
    src.write_bytes(content)
    r = run_ctxtool("export", "--to", to, str(src), cache=tmp_path / "c")
    assert r.returncode == ExitCode.INPUT and r.stdout == b"", r.stderr


def test_join_into_a_directory_is_refused_before_any_shard(tmp_path: Path) -> None:
    """``--join -o out/``: the joined output is one file; before, the run did every shard,
    left out.parts/ behind and was refused only when the joined file was opened."""
    r = run_ctxtool("convert", str(SAMPLES / "openai_dataset.jsonl"), "--to", "openai", "--join", "-o",
                    f"{tmp_path}/out/", cache=tmp_path / "c", cwd=tmp_path)
    assert r.returncode == ExitCode.USAGE and "--join writes one file" in r.stderr.decode(), r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []
