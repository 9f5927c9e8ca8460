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
from ctxtool import compaction as compact
from ctxtool.history import cut as history, validate
from ctxtool.stats import transcript as stats
from ctxtool.summarizers import get_summarizer
t = next(ctxtool.read({str(SAMPLES / "claude_code_session.jsonl")!r}))
r = stats.stats([{str(SAMPLES)!r}])
assert r.totals.messages > 0
assert validate.check_messages(t.messages) == []
cut = history.find_cut(t.messages, keep_recent_tokens=1000)
out = compact.compact_transcript(t, get_summarizer("heuristic"), compact.CompactOptions(force=True, keep_recent_tokens=1000))
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
