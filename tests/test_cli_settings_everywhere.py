"""The ``tokenizer`` and ``model`` settings (a config file, ``CTXTOOL_TOKENIZER`` /
``CTXTOOL_MODEL``) reach every command that counts tokens: ``stats``, ``score``, ``truncate``
and ``trim`` read only the flags before (``stats --json`` said "tokenizer": "heuristic" with
``CTXTOOL_TOKENIZER=o200k_base`` set). Each command runs in a real process, the setting given
by environment and by config file: the two must print the same, and the same as the flag for
the tokenizer (a model setting comes after the model a transcript records, a ``--model`` flag
before it, so the flag is no oracle there); the default run is the control: it must differ, or
the setting was never tested."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from io_pipes import SAMPLES

ROLLOUT = str(SAMPLES / "codex_rollout.jsonl")
CASES = {
    "stats": ["stats", "--json", ROLLOUT],
    "score": ["score", "--recorded", "--json", str(SAMPLES / "pi_session.jsonl")],
    "truncate": ["truncate", "--json", ROLLOUT, "-o", "out.jsonl"],
    "trim": ["trim", "--json", ROLLOUT, "-o", "out.jsonl"],
    "check": ["check", "--json", ROLLOUT],
}


def _run(args: list[str], cwd: Path, env: dict[str, str], k: int) -> dict[str, object]:
    base = {key: v for key, v in os.environ.items() if not key.startswith("CTXTOOL_")}
    run = subprocess.run([sys.executable, "-m", "ctxtool", *args], cwd=cwd, capture_output=True, check=False,
                         env={**base, "CTXTOOL_CACHE_DIR": str(cwd / f"cache{k}"), **env}, timeout=120)
    assert run.returncode == 0, run.stderr.decode(errors="replace")
    return json.loads(run.stdout)  # type: ignore[no-any-return]


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize(("flag", "var", "key", "value"), [
    ("--tokenizer", "CTXTOOL_TOKENIZER", "tokenizer", "o200k_base"),
    (None, "CTXTOOL_MODEL", "model", "gpt-4o"),
])
def test_setting_reaches_the_command(name: str, flag: str | None, var: str, key: str, value: str,
                                     tmp_path: Path) -> None:
    args = CASES[name]
    plain, configured = tmp_path / "plain", tmp_path / "configured"
    plain.mkdir()
    configured.mkdir()
    (configured / "ctxtool.toml").write_text(f'{key} = "{value}"\n', encoding="utf-8")
    by_env = _run(args, plain, {var: value}, 2)
    by_file = _run(args, configured, {}, 3)
    default = _run(args, plain, {}, 4)
    assert by_file == by_env
    if flag is not None:
        assert by_env == _run([*args, flag, value], plain, {}, 1)
    assert default != by_env  # the control: the setting changes what the command prints
