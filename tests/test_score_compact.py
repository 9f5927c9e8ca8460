"""compact and score together: the retention figure in compact's report, --min-retention,
the rejection rules (template echo, input echo, cycles) on a model's output over loopback
HTTP, and the tau-bench refusal that says what would help."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import SAMPLES, corpus_file
from fake_llm import FakeLLM, RecordedRequest
from test_compact import opts, write_chat
from test_json_shapes import check_json
from typer.testing import CliRunner

from ctxtool import formats
from ctxtool.cli import app
from ctxtool.cli.exits import ExitCode
from ctxtool.compaction.core import compact_transcript
from ctxtool.compaction.run import compact_file
from ctxtool.errors import CtxtoolError, Failure
from ctxtool.score import quality
from ctxtool.score.core import score, score_files
from ctxtool.score.kinds import PROBE_KINDS, register_probe
from ctxtool.score.probes import CompactionCut, Probe, ProbeKind
from ctxtool.score.text import Haystack
from ctxtool.summarizers import get_summarizer
from ctxtool.summarizers import prompt as sp

runner = CliRunner()
JUNK = "## Goal\nWork on the project.\n\n## Next Steps\n1. Keep going with it.\n"


def remote(llm: FakeLLM) -> Any:
    return get_summarizer("openai", base_url=llm.openai_base, model="small", api_key="k", retries=0)


def test_compact_reports_the_retention_score_measures(tmp_path: Path) -> None:
    src = write_chat(tmp_path / "c.json", turns=6)
    out = tmp_path / "o.json"
    rep = compact_file(src, out, options=opts())
    r = rep.records[0]
    assert r.status == "compacted" and r.retention is not None and 0 < r.retention <= 1
    assert r.retention == round(next(score_files(src, out)).retention, 4)
    res = runner.invoke(app, ["compact", str(src), "--force", "--keep-recent-tokens", "400", "-o",
                              str(tmp_path / "o2.json"), "--json"])
    assert res.exit_code == 0, res.output
    d = check_json("compact", "compact", res.stdout)
    assert d["transcripts"][0]["retention"] == r.retention == d["totals"]["retention"]
    text = runner.invoke(app, ["compact", str(src), "--force", "--keep-recent-tokens", "400", "-o",
                               str(tmp_path / "o3.json")])
    assert f"retention {r.retention:.0%}" in text.stdout
    dry = check_json("compact", "compact", runner.invoke(app, ["compact", str(src), "--dry-run", "--force", "--json"]).stdout)
    assert dry["transcripts"][0]["retention"] is None


def test_min_retention_rejects_a_poor_summary_and_falls_back(tmp_path: Path) -> None:
    src = write_chat(tmp_path / "c.json", turns=6)
    heuristic = compact_file(src, tmp_path / "h.json", options=opts()).records[0].retention
    with FakeLLM(reply=JUNK) as llm:
        junk = compact_file(src, tmp_path / "j.json", options=opts(), summarizer=remote(llm)).records[0].retention
        assert heuristic is not None and junk is not None and junk < heuristic
        bar = (junk + heuristic) / 2
        with pytest.raises(CtxtoolError) as e:
            compact_file(src, tmp_path / "o.json", options=opts(min_retention=bar), summarizer=remote(llm))
        assert "below --min-retention" in e.value.message and "use --fallback" in e.value.message
        assert e.value.kind == Failure.REMOTE and not (tmp_path / "o.json").exists()
        r = compact_file(src, tmp_path / "o.json", options=opts(min_retention=bar, fallback=True),
                            summarizer=remote(llm)).records[0]
    assert r.status == "compacted" and r.fallback_used and r.retention == heuristic



@pytest.fixture
def unkeepable() -> Iterator[None]:
    """A probe kind no summary keeps (a registered kind, as a user would add one)."""

    @register_probe
    class Unkeepable(ProbeKind):
        name = "unkeepable"

        def extract(self, part: CompactionCut) -> list[Probe]:
            return [self.probe("a value no summary holds", target="\x00never\x00")]

        def check(self, probe: Probe, after: Haystack) -> bool:
            return False

    yield
    PROBE_KINDS.unregister("unkeepable")


def test_the_heuristic_below_the_bar_fails_saying_what_would_help(tmp_path: Path, unkeepable: None) -> None:
    src = write_chat(tmp_path / "c.json", turns=6)
    with pytest.raises(CtxtoolError) as e:
        compact_file(src, tmp_path / "o.json", options=opts(min_retention=0.95))
    msg = e.value.message
    assert "below --min-retention 95.0%" in msg and "lost 1 probe(s): unkeepable: a value no summary holds" in msg
    assert "the heuristic summary is in use" in msg and "--on-error skip" in msg and "use --fallback" not in msg
    r = runner.invoke(app, ["compact", str(src), "--force", "--keep-recent-tokens", "400", "--min-retention", "0.95",
                            "-o", str(tmp_path / "o.json")])
    assert r.exit_code == ExitCode.REMOTE and "below --min-retention 95.0%" in r.stderr and "Traceback" not in r.stderr


def test_min_retention_is_a_share(tmp_path: Path) -> None:
    src = write_chat(tmp_path / "c.json", turns=6)
    r = runner.invoke(app, ["compact", str(src), "--force", "--min-retention", "1.5", "-o", str(tmp_path / "o.json")])
    assert r.exit_code == ExitCode.USAGE


def _echo(req: RecordedRequest) -> str:
    return req.prompt.split("<conversation>\n", 1)[1].split("\n</conversation>", 1)[0]


CYCLE = "The user wants the test fixed.\nI will fix the test now.\n" * 6


@pytest.mark.parametrize(("reply", "why"), [
    (sp.STRUCTURED_FORMAT, "echoes the prompt's section template"),
    ("## Goal\nFix the test\n" + sp.STRUCTURED_FORMAT.split("\n", 2)[2], "echoes the prompt's section template"),
    (_echo, "echoes its input"),
    (lambda req: req.prompt, "echoes the prompt"),
    (CYCLE, "repeats a cycle of 2 lines"),
    ("## Goal\n" + "- fix the parser\n" * 8, "repeats one line"),
])
def test_model_outputs_that_are_no_summary_are_rejected(reply: Any, why: str, tmp_path: Path) -> None:
    src = write_chat(tmp_path / "c.json", turns=6, filler=60)
    with FakeLLM(reply=reply) as llm:
        with pytest.raises(CtxtoolError, match=why):
            compact_file(src, tmp_path / "o.json", options=opts(), summarizer=remote(llm))
        assert not (tmp_path / "o.json").exists()
        r = compact_file(src, tmp_path / "o.json", options=opts(fallback=True), summarizer=remote(llm)).records[0]
    assert r.status == "compacted" and r.fallback_used
    assert "## Goal" in json.loads((tmp_path / "o.json").read_text())[1]["content"]


def test_short_and_structured_summaries_pass() -> None:
    assert quality.reject("## Goal\nfix it\n") is None
    assert quality.reject("## Goal\nFix the parser\n## Progress\n" + "".join(f"- [x] edit src/m{i}.py\n" for i in range(20))) is None
    assert quality.reject("   ") is not None


@pytest.mark.parametrize("path", sorted(p for p in SAMPLES.glob("*.json*")), ids=lambda p: p.name)
def test_heuristic_summaries_of_the_samples_pass_the_rules(path: Path) -> None:
    for t in formats.read(path):
        o = compact_transcript(t, options=opts(keep_recent_tokens=50))
        if o.report.status == "not_smaller":  # a tiny record: its summary would not make it smaller
            assert "would not be smaller" in o.report.reason
            continue
        if o.summary is not None:
            assert quality.reject(o.summary) is None
            # a retention exactly when the removed part had something to probe
            assert (o.report.retention is None) == (score(t, o.transcript, with_controls=False).results == [])


def test_taubench_records_that_would_grow_are_left_unchanged(tmp_path: Path) -> None:
    """The heuristic summary of a short tau-bench record is larger than what it replaces: the
    record is written unchanged with the reason (naming what would help), and the run succeeds."""
    src = corpus_file("openai_chat", "taubench_gpt-4o-airline.json")
    r = runner.invoke(app, ["compact", str(src), "--force", "--keep-recent-tokens", "2000", "-o", str(tmp_path / "o.json"),
                            "--json"])
    assert r.exit_code == 0, r.stderr
    d = json.loads(r.stdout)
    unchanged = [x for x in d["transcripts"] if x["status"] == "not_smaller"]
    assert unchanged and d["totals"]["not_smaller"] == len(unchanged)
    why = unchanged[0]["reason"]
    assert "would not be smaller" in why and "smaller --keep-recent-tokens (now 2,000)" in why
    assert all(x["tokens_after"] == x["tokens_before"] for x in unchanged)
    assert len(list(formats.read(tmp_path / "o.json"))) == d["totals"]["transcripts"]
