"""The library stands without the CLI: no typer, no rich."""

from __future__ import annotations

import subprocess
import sys

from conftest import SAMPLES

CODE = f"""
import sys
sys.modules["typer"] = None  # any import of typer or rich now fails
sys.modules["rich"] = None
import ctxtool
from ctxtool.summarizers import get_summarizer
t = next(ctxtool.read({str(SAMPLES / "claude_code_session.jsonl")!r}))
r = ctxtool.stats_files([{str(SAMPLES)!r}])
assert r.totals.messages > 0
assert ctxtool.check_messages(t.messages) == []
cut = ctxtool.find_cut(t.messages, keep_recent_tokens=1000)
from ctxtool.compaction.core import compact_transcript
out = compact_transcript(t, get_summarizer("heuristic"), ctxtool.CompactOptions(force=True, keep_recent_tokens=1000))
assert out.report.status == "compacted"
w = ctxtool.window_file({str(SAMPLES / "openai_dataset.jsonl")!r}, None, max_messages=2, jobs=2)
rp = ctxtool.repair_file({str(SAMPLES / "pi_session.jsonl")!r}, None)
assert w.totals()["transcripts"] == 3 and w.dropped > 0 and rp.to_json()["totals"]["transcripts"] == 1
assert "typer" not in [m for m in sys.modules if sys.modules[m] is not None]
print("ok", r.totals.messages, cut.cut_index)
"""


def test_library_without_typer_or_rich() -> None:
    proc = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok ")


def test_public_api_exports() -> None:
    import ctxtool

    for name in ctxtool.__all__:
        assert getattr(ctxtool, name) is not None


def test_every_command_has_its_operation_in_the_library() -> None:
    """Each command's file operation is a public name of ``ctxtool`` (no CLI needed)."""
    import ctxtool

    for name in ("stats_files", "validate_files", "convert_file", "truncate_file", "trim_file", "restore_file",
                 "cut_transcript", "check_transcript", "window_file", "repair_file", "archive_file", "replay_file",
                 "load_instructions", "compact_file", "compactions_files", "score_files", "export_file",
                 "usage_report", "redact_files"):
        assert callable(getattr(ctxtool, name)), name
