"""Every table in an 80-column terminal: each line fits, and no number is cut (``12,3…``):
columns of lesser use are left out (the caption says which), numbers keep their cells whole
and the key column folds onto more lines."""

from __future__ import annotations

import re

import pytest
from conftest import CORPUS, SAMPLES
from terminal import terminal_screen

CUT_NUMBER = re.compile(r"\d[\d,.]*…")
CLAUDE = str(SAMPLES / "claude_code_session.jsonl")
SPOTTER = CORPUS / "claude_code" / "spotter_ae4a77f8_main.jsonl"

COMMANDS = [
    ["stats", CLAUDE], ["stats", str(SAMPLES)], ["stats", str(SAMPLES / "openai_dataset.jsonl")],
    ["check", CLAUDE], ["check", str(SAMPLES)], ["cut", str(SAMPLES)],
    ["replay", CLAUDE, "--no-chart"], ["replay", str(SAMPLES / "openai_dataset.jsonl")],
    ["models"], ["models", "claude"], ["validate", str(SAMPLES / "codex_rollout.jsonl")],
    ["usage", str(SAMPLES)], ["usage", str(SAMPLES), "--by", "session"], ["usage", str(SAMPLES), "--by", "block", "--breakdown"],
]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(x.rsplit("/", 1)[-1] for x in a))
def test_tables_fit_80_columns(args: list[str]) -> None:
    screen = terminal_screen(args, ok=(0, 4, 5))
    lines = screen.splitlines()
    assert all(len(ln) <= 80 for ln in lines), "\n".join(ln for ln in lines if len(ln) > 80)
    assert not CUT_NUMBER.search(screen), screen


def test_compactions_of_a_long_session_fit(tmp_path) -> None:  # type: ignore[no-untyped-def]
    if not SPOTTER.is_file():
        pytest.skip("../shared/corpus not present")
    screen = terminal_screen(["compactions", str(SPOTTER)])
    assert all(len(ln) <= 80 for ln in screen.splitlines()) and not CUT_NUMBER.search(screen), screen
    assert "142,431" in screen  # the tokens before its compaction, whole
