"""A JSON document written on one line (``jq -c``, ``json.dump`` without indent) is read as the
document it is: an ATIF trajectory and an Inspect log were "cannot detect the transcript format"
(a one-line file is JSON Lines to the reader, and those formats read whole documents only).
Through the CLI: detected, the same figures as the pretty-printed file, written back byte for
byte, cut and restored byte for byte; a one-line dataset record is still a record."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import CORPUS, SAMPLES
from io_pipes import ctxtool_ok

DOCS = [SAMPLES / "atif_trajectory.json", Path(__file__).parent / "data" / "atif" / "trajectory_v1_8_audio.json",
        CORPUS / "trajectories" / "inspect_ai" / "inspect_browser_gpt-4o-mini.json",
        CORPUS / "trajectories" / "inspect_ai" / "inspect_log_images_tc_gpt-4o.json"]
STYLES = {"json.dump": {}, "compact": {"separators": (",", ":")}, "ascii": {"ensure_ascii": True}}


def run(tmp_path: Path, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return ctxtool_ok(*args, cache=tmp_path / "cache", cwd=tmp_path, input=stdin)


def figures(tmp_path: Path, path: Path | str, stdin: bytes | None = None) -> tuple[Any, ...]:
    d = json.loads(run(tmp_path, "stats", "--json", str(path), stdin=stdin).stdout)
    return d["totals"]["messages"], d["totals"]["tokens"], d["totals"]["tool_calls"], [t["format"] for t in d["transcripts"]]


@pytest.mark.parametrize("style", sorted(STYLES))
@pytest.mark.parametrize("pretty", DOCS, ids=lambda p: p.name)
def test_a_document_on_one_line_reads_as_the_document(tmp_path: Path, pretty: Path, style: str) -> None:
    if not pretty.is_file():
        pytest.skip(f"{pretty} not present")
    one = tmp_path / pretty.name
    one.write_text(json.dumps(json.loads(pretty.read_bytes()), **STYLES[style]) + ("\n" if style == "compact" else ""))
    assert one.read_bytes().count(b"\n") <= 1
    want = figures(tmp_path, pretty)
    assert figures(tmp_path, one) == want
    assert figures(tmp_path, "-", one.read_bytes()) == want  # from a pipe too
    fmt = want[3][0]
    back = tmp_path / "back.json"
    run(tmp_path, "convert", str(one), "--to", fmt, "-o", str(back))
    assert back.read_bytes() == one.read_bytes()
    cut, cut_pretty, restored = tmp_path / "cut.json", tmp_path / "cut_pretty.json", tmp_path / "restored.json"
    for src, dst in ((one, cut), (pretty, cut_pretty)):
        run(tmp_path, "truncate", str(src), "--max-lines", "3", "--max-bytes", "200", "-o", str(dst))
    assert figures(tmp_path, cut) == figures(tmp_path, cut_pretty)  # the same cuts
    assert cut.read_bytes().count(b"\n") <= 1  # still one line
    run(tmp_path, "restore", str(cut), "-o", str(restored))
    assert restored.read_bytes() == one.read_bytes()


def test_a_one_line_dataset_record_is_still_a_record(tmp_path: Path) -> None:
    rec = tmp_path / "one.jsonl"
    rec.write_bytes((SAMPLES / "openai_dataset.jsonl").read_bytes().splitlines(keepends=True)[0])
    d = json.loads(run(tmp_path, "formats", "--json", str(rec)).stdout)
    assert d["files"][0]["format"] == "openai"
    back = tmp_path / "back.jsonl"
    run(tmp_path, "convert", str(rec), "--to", "openai", "-o", str(back))
    assert back.read_bytes() == rec.read_bytes()
