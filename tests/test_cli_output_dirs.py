"""An output directory that cannot be made (a parent that is a file) is an output error naming
it, exit 8, one line: before, export's pages and index and redact's copies ended with exit 1
("internal error: NotADirectoryError")."""

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
