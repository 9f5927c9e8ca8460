"""An empty value of an option that names a file or directory (``-o "$OUT"`` with OUT unset) is
a usage error naming the option, given before anything is read or written: before, ``-o ''``
wrote to stdout, ``--events ''`` failed with exit 8 after the output was written, and
``--cache-dir ''`` used the default cache. One check (ctxtool.cli.common.PathValue)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from io_pipes import SAMPLES, run_ctxtool

from ctxtool.cli.common import PathValue
from ctxtool.cli.exits import ExitCode

#: the names of options whose value is a path, wherever they appear
PATH_OPTIONS = {"--output", "--events", "--cache-dir", "--plot", "--secrets-from", "--transcripts"}

#: each command's arguments for a run that would do its work (read its input, print or write)
#: were the empty option not refused; "IN" is a transcript in the working directory
ARGS: dict[str, list[str]] = {
    "stats": ["IN"], "validate": ["IN"], "convert": ["--to", "openai", "IN"], "formats": ["IN"], "models": [],
    "truncate": ["IN"], "restore": ["IN"], "trim": ["--budget", "1000", "IN"], "cut": ["IN"], "check": ["IN"],
    "window": ["--max-chars", "100", "IN"], "repair": ["IN"], "archive": ["IN"], "replay": ["IN"],
    "instructions": [], "compact": ["--force", "IN"], "compactions": ["IN"], "score": ["IN", "IN"],
    "export": ["IN"], "config": [], "refs show": ["r-0"], "refs grep": ["x"], "refs ls": [], "refs verify": [],
    "refs gc": ["IN"], "usage": ["IN"], "mcp": [], "redact": ["IN"],
}


def _path_options() -> list[tuple[str, Any]]:
    from ctxtool.cli.docgen import leaves

    return [(path, p) for path, cmd in leaves().items() for p in cmd.params if isinstance(p.type, PathValue)]


def test_every_option_naming_a_path_takes_it_as_one() -> None:
    """Every option of a path's name is a PathValue (one added later too), and every command
    that has one is run below."""
    from ctxtool.cli.docgen import leaves

    for path, cmd in leaves().items():
        for p in cmd.params:
            if set(getattr(p, "opts", ())) & PATH_OPTIONS:
                assert isinstance(p.type, PathValue), (path, p.opts)
    assert {path for path, _ in _path_options()} <= set(ARGS)


@pytest.mark.parametrize(("command", "param"), _path_options(), ids=lambda v: v if isinstance(v, str) else v.opts[0])
def test_an_empty_path_option_is_a_usage_error_before_any_work(tmp_path: Path, command: str, param: Any) -> None:
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(SAMPLES / "pi_session.jsonl", work / "in.jsonl")
    before = sorted(work.iterdir())
    args = ["in.jsonl" if a == "IN" else a for a in ARGS[command]]
    option = param.opts[0]
    r = run_ctxtool(*command.split(), option, "", *args, cache=tmp_path / "cache", cwd=work, input=b"")
    err = r.stderr.decode()
    assert r.returncode == ExitCode.USAGE, err
    assert err == f"ctxtool: error: {'/'.join(param.opts)}: the path is empty\n"
    assert r.stdout == b""
    assert sorted(work.iterdir()) == before and not (tmp_path / "cache").exists()


def test_an_empty_pin_file_is_a_usage_error(tmp_path: Path) -> None:
    """``--pin @`` names a file of no name: to pathlib the current directory, read as a file."""
    r = run_ctxtool("compact", "--force", "--pin", "@", str(SAMPLES / "pi_session.jsonl"), cache=tmp_path / "c")
    assert r.returncode == ExitCode.USAGE and r.stdout == b""
    assert r.stderr.decode() == "ctxtool: error: --pin @FILE: the path is empty\n"
