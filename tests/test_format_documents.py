"""JSON documents (not JSON Lines) are written as they were: indented or on one line, ending
with a newline or not, whether unchanged or changed, directly and through canonical JSONL."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from conftest import SAMPLES, write_bytes

from ctxtool import formats
from ctxtool.io.jsonl import open_source
from ctxtool.tool_outputs import files as tools_ops
from ctxtool.tool_outputs.algorithms import Limits

DOCS = sorted(p for p in SAMPLES.glob("*.json"))
TIGHT = Limits(max_lines=3, max_bytes=200, max_chars=200, spill_threshold=40_000, max_line_length=80)


def _variants(p: Path) -> list[tuple[str, bytes]]:
    raw = p.read_bytes().rstrip(b"\n")
    out = [("indented+nl", raw + b"\n"), ("indented", raw)]
    if raw.startswith(b"["):  # an object on one line is a JSON Lines file of one record
        one_line = json.dumps(json.loads(raw), ensure_ascii=False, separators=(",", ":")).encode()
        out += [("one-line+nl", one_line + b"\n"), ("one-line", one_line)]
    return out


@pytest.mark.parametrize("path", DOCS, ids=[p.name for p in DOCS])
def test_documents_keep_their_end_and_layout(path: Path, tmp_path: Path) -> None:
    for name, data in _variants(path):
        src = tmp_path / f"{name}.json"
        src.write_bytes(data)
        ts = list(formats.read(src))
        assert write_bytes(ts) == data, name
        # through canonical JSONL and back
        canon = tmp_path / "c.jsonl"
        formats.write_path(ts, canon, "ctxtool")
        assert write_bytes(list(formats.read(canon)), ts[0].format) == data, name
        # every message changed: the document still ends as it did, laid out as it was
        for t in ts:
            for m in t.messages:
                m.touch()
        out = write_bytes(ts)
        assert out.endswith(b"\n") == data.endswith(b"\n"), name
        assert (b"\n" in out.rstrip(b"\n")) == (b"\n" in data.rstrip(b"\n")), name
        assert json.loads(out) == json.loads(data), name


@pytest.mark.parametrize("path", DOCS, ids=[p.name for p in DOCS])
def test_truncated_and_restored_documents_end_as_they_did(path: Path, tmp_path: Path) -> None:
    src, short, back = tmp_path / "in.json", tmp_path / "short.json", tmp_path / "back.json"
    src.write_bytes(path.read_bytes().rstrip(b"\n"))
    tools_ops.truncate_file(str(src), str(short), limits=TIGHT, include="all", cache=tmp_path / "c")
    assert not short.read_bytes().endswith(b"\n")
    tools_ops.restore_file(str(short), str(back), cache=tmp_path / "c")
    assert not back.read_bytes().endswith(b"\n")
    assert json.loads(back.read_bytes()) == json.loads(src.read_bytes())


def test_a_document_from_json_lines_is_indented_and_ends_with_a_newline(tmp_path: Path) -> None:
    """A document ctxtool makes from another layout has no source end to keep: indented by 2,
    with a final newline."""
    src = tmp_path / "chat.jsonl"
    src.write_text('{"role":"user","content":"hi"}\n{"role":"assistant","content":"hello"}')
    out = io.BytesIO()
    formats.write(list(formats.read(src)), out, "cline")
    assert out.getvalue().endswith(b"]\n") and out.getvalue().startswith(b"[\n  {")


def test_the_end_of_a_piped_document_is_kept(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    data = (SAMPLES / "openai_chat.json").read_bytes().rstrip(b"\n")
    pid = os.fork()
    if pid == 0:  # the writer end of the pipe
        with open(fifo, "wb") as w:
            w.write(data)
        os._exit(0)
    src = open_source(str(fifo))
    os.waitpid(pid, 0)
    assert src.style is not None and src.style.final_newline is False
    assert write_bytes(list(formats.read_source(src))) == data
