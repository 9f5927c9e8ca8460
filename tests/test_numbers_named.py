"""Numbers explained: a figure that counts only since the last compaction says so; compact and
score name the same quantity the same way, with the same value; a file named twice (relative
and absolute) is one file."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from conftest import CORPUS
from typer.testing import CliRunner

from ctxtool.cli import app

ROOT = Path(__file__).resolve().parent.parent
S = ROOT / "samples"
runner = CliRunner()


def test_stats_says_what_counts_since_the_last_compaction():
    r = runner.invoke(app, ["stats", str(S / "pi_session.jsonl")])
    assert r.exit_code == 0
    assert "context (since the last compaction" in r.stdout
    assert re.search(r"^chars since the last compaction: warning ≥ 200,000, critical ≥ 400,000", r.stdout, re.M)


SPOTTER = CORPUS / "claude_code" / "spotter_ae4a77f8_main.jsonl"  # compacted before: the figures count after it


@pytest.mark.parametrize("src", [S / "claude_code_session.jsonl", SPOTTER], ids=["sample", "corpus-compacted"])
def test_compact_and_score_name_one_quantity_alike(tmp_path, src):
    if not src.exists():
        pytest.skip("corpus not present")
    out = tmp_path / "c.jsonl"
    r = runner.invoke(app, ["compact", str(src), "--force", "-k", "1000", "-o", str(out)])
    assert r.exit_code == 0, r.output
    m = re.search(r"compacted ([\d,]+) → ([\d,]+) message tokens since the last compaction .*?: "
                  r"([\d,]+) of ([\d,]+) messages summarized", r.stdout)
    assert m, r.stdout
    s = runner.invoke(app, ["score", str(src), str(out)])
    assert s.exit_code == 0, s.output
    n = re.search(r": ([\d,]+) → ([\d,]+) message tokens since the last compaction \(.*?\); ([\d,]+) of ([\d,]+) "
                  r"messages summarized", s.stdout)
    assert n, s.stdout
    assert m.groups() == n.groups()


def test_a_file_named_twice_is_read_once(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    rel = "samples/pi_session.jsonl"
    absolute = str(ROOT / rel)
    one = json.loads(runner.invoke(app, ["compactions", rel, "--json"]).stdout)
    both = json.loads(runner.invoke(app, ["compactions", rel, absolute, "samples", "--json"]).stdout)
    pi = [t for t in both["transcripts"] if os.path.samefile(t["path"], absolute)]
    assert len(pi) == 1 and pi[0]["path"] == rel
    assert both["totals"]["compactions"] == sum(t["count"] for t in both["transcripts"])
    assert one["totals"]["transcripts"] == 1
    stats = json.loads(runner.invoke(app, ["stats", rel, absolute, "samples", "--json"]).stdout)
    assert stats["totals"]["transcripts"] == json.loads(runner.invoke(app, ["stats", "samples", "--json"]).stdout)["totals"]["transcripts"]


def test_files_read_again_are_named_once():
    """A file read as ``src/a.py`` and as ``/repo/src/a.py`` is one file (relative names joined
    to the directory the session records)."""
    from ctxtool.stats.compactions import _normal

    assert _normal("/repo", "src/a.py") == _normal("/repo", "/repo/src/./a.py") == "/repo/src/a.py"
    assert _normal("/repo", "../other/b.py") == "/other/b.py"
    assert _normal(None, "src/a.py") == "src/a.py" and _normal("/repo", "~/x") == "~/x"
    pi = CORPUS / "pi" / "pi_before-compaction.jsonl"
    if not pi.exists():
        pytest.skip("corpus not present")
    d = json.loads(runner.invoke(app, ["compactions", str(pi), "--json"]).stdout)
    for c in d["transcripts"][0]["compactions"]:
        assert all(p.startswith("/") for p in c["reread"])
        assert len(set(c["reread"])) == len(c["reread"])
    # before, #1 listed tui-renderer.ts and main-new.ts twice (relative and absolute): 13 in all
    assert d["totals"]["reread_files"] == 10
