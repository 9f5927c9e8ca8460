"""ctxtool score: probes from what AFTER lost, on a hand-built transcript where the lost
probes are known; the CLI (CliRunner and a subprocess); --judge over loopback HTTP."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fake_llm import FakeLLM, RecordedRequest
from test_json_shapes import check_json, check_jsonl
from typer.testing import CliRunner

from ctxtool import formats
from ctxtool.cli import app
from ctxtool.model import KIND_COMPACTION_SUMMARY, Block, Message, Metadata, Transcript
from ctxtool.score.core import score
from ctxtool.score.kinds import PROBE_KINDS, register_probe
from ctxtool.score.probes import Probe, ProbeKind
from ctxtool.score.text import Haystack, key_words
from ctxtool.summarizers import get_summarizer
from ctxtool.summarizers.prompt import SUMMARY_PREFIX

runner = CliRunner()


def text(s: str) -> Block:
    return Block("text", text=s)


def call(cid: str, name: str, **args: Any) -> Block:
    return Block("tool_call", id=cid, name=name, arguments=args)


def result(cid: str, s: str, err: bool = False) -> Block:
    return Block("tool_result", id=cid, text=s, is_error=err)


GOAL = "Fix the failing login test in src/auth/login.py. Do not change the public API."
LATER = "Also set AUTH_TOKEN_TTL to 3600 and use https://auth.example.com/v2 for the endpoint."
ERROR = "E   AssertionError: expected token, got None"
NEXT = "Next I will run the tests again to check `validate_token()` works."


def lost_part() -> list[Message]:
    return [
        Message("user", [text(GOAL)]),
        Message("assistant", [text("Let me read the module."), call("c1", "read_file", path="src/auth/login.py")]),
        Message("tool", [result("c1", "def login(user):\n    return check(user)\n")]),
        Message("user", [text("<system-reminder>Remember the to-do list.</system-reminder>")]),  # injected: no probe
        Message("assistant", [call("c2", "bash", command="pytest tests/test_login.py")]),
        Message("tool", [result("c2", f"{ERROR}\nFAILED tests/test_login.py::test_login", err=True)]),
        Message("user", [text(LATER)]),
        Message("assistant", [text("I changed `validate_token()` in the edit below."),
                              call("c3", "edit_file", path="src/auth/token.py", old="a", new="b")]),
        Message("tool", [result("c3", "ok")]),
        Message("assistant", [text(NEXT)]),
    ]


def kept_part() -> list[Message]:
    return [Message("user", [text("Now update the changelog please.")]), Message("assistant", [text("Done.")])]


SUMMARY = f"""{SUMMARY_PREFIX}

## Goal
fix the failing   LOGIN test in src/auth/login.py.  Do not change the public API.

## Critical Context
- Files: src/auth/login.py (read), src/auth/token.py (modified)
- AUTH_TOKEN_TTL must be set
"""


def transcript(msgs: list[Message], path: str = "t.jsonl") -> Transcript:
    return Transcript("ctxtool", [Message("system", [text("You are a coding agent.")]), *msgs], path)


def before_after() -> tuple[Transcript, Transcript]:
    summary = Message("user", [text(SUMMARY)], metadata=Metadata(kind=KIND_COMPACTION_SUMMARY))
    return transcript(lost_part() + kept_part(), "before.jsonl"), transcript([summary, *kept_part()], "after.jsonl")


def write(t: Transcript, path: Path) -> Path:
    with path.open("wb") as fh:
        formats.write([t], fh, "ctxtool")
    return path


def test_the_known_lost_probes() -> None:
    before, after = before_after()
    rep = score(before, after)
    per = {k.kind: (k.kept, k.probes) for k in rep.kinds if k.probes}
    assert per == {"goal": (1, 1), "request": (0, 1), "constraint": (1, 1), "failure": (0, 1),
                   "file_modified": (1, 1), "identifier": (2, 4)}
    lost = {(p.kind, p.target) for p in rep.lost}
    assert lost == {("request", LATER), ("failure", "E AssertionError: expected token, got None"),
                    ("identifier", "https://auth.example.com/v2"), ("identifier", "validate_token")}
    failure = next(p for p in rep.lost if p.kind == "failure")
    assert failure.note == "open" and failure.text.startswith("pytest tests/test_login.py failed: ")
    # weighted: goal 3, request 2, constraint 2, failure 1.5, file_modified 1, identifier 0.5
    assert rep.retention == pytest.approx((3 + 0 + 2 + 0 + 1 + 0.5 * 2 / 4) / (3 + 2 + 2 + 1.5 + 1 + 0.5))
    assert rep.lost_messages == len(lost_part()) and rep.messages_before == 13 and rep.messages_after == 4
    assert rep.tokens_before > rep.tokens_after > 0 and rep.ratio == rep.tokens_before / rep.tokens_after
    # the user's own words only: the injected reminder is no request; narration is no probe
    assert not any("to-do list" in r.probe.text or "Next I will" in r.probe.text for r in rep.results)
    # the same cut with each control, at the same budget
    ctrl = {c.name: c for c in rep.controls}
    assert list(ctrl) == ["none", "content_free", "identifiers", "tail"]
    assert ctrl["none"].retention == ctrl["content_free"].retention == 0.0
    assert rep.margins()["none"] == pytest.approx(rep.retention)
    assert rep.summary.quality is None and ctrl["none"].quality == "the summary is empty"


def test_nothing_lost_claims_no_retention() -> None:
    # nothing was probed, so nothing is claimed: not "100% kept"
    before, _ = before_after()
    rep = score(before, before)
    assert rep.results == [] and rep.retention is None and rep.ratio == 1.0 and rep.lost_messages == 0
    assert rep.margins() == {} and rep.to_json()["retention"] is None


def test_a_failure_fixed_before_the_cut_is_no_probe_and_calling_it_open_is_a_false_claim() -> None:
    msgs = lost_part()
    msgs += [Message("assistant", [call("c4", "bash", command="pytest tests/test_login.py -x")]),
             Message("tool", [result("c4", "1 passed")])]
    summary = Message("user", [text(SUMMARY + "\n## Next Steps\n- AssertionError: expected token, got None "
                                   "is still failing\n")], metadata=Metadata(kind=KIND_COMPACTION_SUMMARY))
    rep = score(transcript(msgs + kept_part()), transcript([summary, *kept_part()]))
    assert not [r for r in rep.results if r.probe.kind == "failure"]
    assert [c.kind for c in rep.claims] == ["fixed_called_open"]
    assert "still failing" in rep.claims[0].line


def test_normalized_matching() -> None:
    hay = Haystack.of(["The user said: PLEASE   keep the\nold config format; the rest is fine."])
    assert hay.has_words("please keep the old config format")  # case, whitespace, punctuation aside
    assert not hay.has_words("keep the config format")  # words in order and contiguous
    assert hay.has_value("CONFIG FORMAT") and not hay.has_value("config.yaml")
    # paraphrase: the key words of a passage in one window, in any order and form
    probe = key_words("Please migrate every test to pytest fixtures and keep the old config format")
    assert Haystack("Kept the old config format; tests migrated to pytest fixtures.").has_keys(probe)
    assert not Haystack("Nothing about it here at all, only the config.").has_keys(probe)
    # the same words spread over a long text are not one passage
    spread = " ".join(["migrate"] + ["filler"] * 80 + ["pytest"] + ["filler"] * 80 + ["fixtures config format"])
    assert not Haystack(spread).has_keys(probe)
    # reactions and stop words are no key words
    assert key_words("ok, looks good, continue please") == []


def test_a_new_probe_kind() -> None:
    @register_probe
    class Tickets(ProbeKind):
        name = "ticket"
        help = "ticket numbers the user gave"

        def extract(self, part: Any) -> list[Probe]:
            return [self.probe("AUTH-42", message=i) for i, t in part.user_words() if "login" in t]

        def check(self, probe: Probe, summary: Haystack) -> bool:
            return summary.has_value(probe.target)

    try:
        assert "ticket" in PROBE_KINDS.names()
        rep = score(*before_after())
        assert [p.target for p in rep.lost if p.kind == "ticket"] == ["AUTH-42"]
    finally:
        PROBE_KINDS.unregister("ticket")
    assert "ticket" not in PROBE_KINDS.names()


def test_cli_text_json_and_jsonl(tmp_path: Path) -> None:
    before, after = before_after()
    b, a = write(before, tmp_path / "before.jsonl"), write(after, tmp_path / "after.jsonl")
    r = runner.invoke(app, ["score", str(b), str(a)])
    assert r.exit_code == 0, r.output
    assert "retention 62.5%" in r.stdout and "lost request: Also set AUTH_TOKEN_TTL" in r.stdout
    assert "identifier 2/4" in r.stdout and "controls: none 0.0% (+62.5%) · content_free 0.0% (+62.5%)" in r.stdout
    d = check_json("score", "score", runner.invoke(app, ["score", str(b), str(a), "--json", "--budget", "20"]).stdout)
    item = d["transcripts"][0]
    assert d["budget"] == item["budget"] == 20 and item["summary"]["tokens"] > 20
    assert item["retention"] < 0.625 and item["curve"][-1]["retention"] == pytest.approx(0.625)  # the head only
    assert [c["name"] for c in item["controls"]] == ["none", "content_free", "identifiers", "tail"]
    assert all(c["tokens"] <= 20 for c in item["controls"])
    assert d["totals"]["lost"] == len(item["lost"]) and d["judge"] is None
    lines = check_jsonl("score", "score", runner.invoke(app, ["score", str(b), str(a), "--jsonl"]).stdout)
    assert len(lines) == 2


def test_cli_subprocess_and_errors(tmp_path: Path) -> None:
    before, after = before_after()
    b, a = write(before, tmp_path / "before.jsonl"), write(after, tmp_path / "after.jsonl")
    p = subprocess.run([sys.executable, "-m", "ctxtool", "score", str(b), str(a)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0 and "retention" in p.stdout and p.stderr == ""
    two = tmp_path / "two.jsonl"
    two.write_bytes(b.read_bytes() + b.read_bytes())
    p = subprocess.run([sys.executable, "-m", "ctxtool", "score", str(two), str(a)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 2 and "one to one" in p.stderr and "Traceback" not in p.stderr
    r = runner.invoke(app, ["score", str(b), str(a), "--judge", "heuristic"])
    assert r.exit_code == 2 and "unknown judge 'heuristic'; choose one of: openai, anthropic, command" in r.stderr
    r = runner.invoke(app, ["score", str(b), str(a), "--judge", "openai"], env={"CTXTOOL_SUMMARIZER_MODEL": ""})
    assert r.exit_code == 2 and "--judge-model" in r.stderr


def test_a_transcript_with_nothing_to_probe_is_left_out_of_the_mean(tmp_path: Path) -> None:
    """Two pairs: one lost 62.5% of its probes' worth, one lost nothing (no probe). The mean is the
    first's alone, the second is counted as unprobed; before, it counted as 100% kept."""
    before, after = before_after()
    (tmp_path / "b").mkdir(), (tmp_path / "a").mkdir()
    write(before, tmp_path / "b" / "lost.jsonl"), write(after, tmp_path / "a" / "lost.jsonl")
    write(before, tmp_path / "b" / "same.jsonl"), write(before, tmp_path / "a" / "same.jsonl")
    cmd = [sys.executable, "-m", "ctxtool", "score", str(tmp_path / "b"), str(tmp_path / "a")]
    p = subprocess.run([*cmd, "--json"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    d = check_json("score", "score", p.stdout)
    by = {Path(x["before"]).name: x for x in d["transcripts"]}
    assert by["same.jsonl"]["retention"] is None and by["same.jsonl"]["probes"] == 0
    assert by["same.jsonl"]["margins"] == {}
    assert d["totals"]["transcripts"] == 2 and d["totals"]["unprobed"] == 1
    assert d["totals"]["retention"] == by["lost.jsonl"]["retention"] == 0.625
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "mean retention 62.5% (1 with nothing to probe, left out)" in p.stdout
    assert "retention - ·" in p.stdout  # the unprobed pair claims no figure


def _answers(req: RecordedRequest) -> str:
    q = req.prompt.rsplit("Question:", 1)[-1]
    if "What did the user ask" in q:
        return f'The user first asked: "{GOAL}" Later: "{LATER}"'
    if "Which files" in q:
        return "src/auth/login.py and src/auth/token.py; AUTH_TOKEN_TTL."
    return "unknown"


def test_judge_over_loopback_http(tmp_path: Path) -> None:
    before, after = before_after()
    with FakeLLM(reply=_answers) as llm:
        judge = get_summarizer("openai", base_url=llm.openai_base, model="judge-model", api_key="k", retries=0)
        rep = score(before, after, judge=judge)
        reqs = list(llm.requests)
    assert rep.judge is not None
    by = {a.category: (a.correct, a.probes) for a in rep.judge.answers}
    # graded against the probes: the answer holds the goal and the later request (recall), the
    # modified file and two of four identifiers (artifacts); "unknown" earns nothing
    assert by == {"recall": (2, 2), "artifacts": (3, 5), "decisions": (0, 2)}
    assert rep.judge.score == pytest.approx((1 + 3 / 5 + 0) / 3)
    assert len(reqs) == 3 and all(r.body["model"] == "judge-model" for r in reqs)
    assert all("<context>" in r.prompt and "fix the failing   LOGIN test" in r.prompt for r in reqs)
    assert not any("https://auth.example.com" in r.prompt for r in reqs)  # AFTER only: the lost URL is not shown


def test_cli_judge(tmp_path: Path) -> None:
    before, after = before_after()
    b, a = write(before, tmp_path / "before.jsonl"), write(after, tmp_path / "after.jsonl")
    with FakeLLM(reply=_answers) as llm:
        r = runner.invoke(app, ["score", str(b), str(a), "--judge", "openai", "--judge-model", "j",
                                "--base-url", llm.openai_base, "--json"], env={"OPENAI_API_KEY": "k"})
    assert r.exit_code == 0, r.output
    d = check_json("score", "score", r.stdout)
    assert d["judge"] == "openai" and d["transcripts"][0]["judge"]["score"] == pytest.approx(0.5333, abs=1e-4)


def test_the_sessions_own_compactions_are_scored_on_what_they_replaced() -> None:
    """pi's two recorded compactions: BEFORE ends at each compaction entry, AFTER holds its
    summary (and the messages pi kept); the probes come from what the summary replaced."""
    from conftest import corpus_file

    from ctxtool.score.recorded import score_recorded

    t = next(iter(formats.read(corpus_file("pi", "pi_before-compaction.jsonl"))))
    got = list(score_recorded(t))
    assert [(r.number, r.kind) for r, _ in got] == [(1, "compaction"), (2, "compaction")]
    for r, rep in got:
        assert len(r.before.entries) < len(r.after.entries) <= len(t.entries)
        assert rep.results and rep.tokens_before > 5 * rep.tokens_after and 0 < rep.retention < 1
        assert {p.kind for p in rep.lost} >= {"request", "identifier"}
        assert r.future and rep.continuation is not None  # what pi did next: continuation probes


def _score_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ctxtool", "score", *args], capture_output=True, text=True, timeout=120)


def test_score_recorded_from_the_cli() -> None:
    """``score SESSION --recorded``: each compaction the session recorded, scored as the library
    scores it (labels PATH@N), through a real process; ``--compaction N`` one of them; the
    wrong combinations are usage errors (exit 2, one line, nothing on stdout)."""
    import json

    from conftest import SAMPLES

    from ctxtool.score.recorded import score_recorded

    pi = str(SAMPLES / "pi_session.jsonl")
    run = _score_cli(pi, "--recorded", "--json")
    assert run.returncode == 0, run.stderr
    d = check_json("score", "score", run.stdout)
    assert d["after_path"] is None and len(d["transcripts"]) == 1
    t = next(iter(formats.read(pi)))
    want = [rep.to_json() for _, rep in score_recorded(t)]
    assert d["transcripts"] == json.loads(json.dumps(want))
    assert d["transcripts"][0]["before"].endswith("pi_session.jsonl@1 (before)")
    assert d["transcripts"][0]["after"].endswith("pi_session.jsonl@1 (compaction)")
    one = _score_cli(pi, "--recorded", "--compaction", "1", "--json")
    assert one.returncode == 0 and json.loads(one.stdout)["transcripts"] == d["transcripts"]
    for args, words in (((pi, "--recorded", "--compaction", "2"), "no session here recorded a compaction #2"),
                        ((pi, pi, "--recorded"), "takes one path"),
                        ((pi,), "score needs AFTER"),
                        ((pi, pi, "--compaction", "1"), "--compaction N selects one"),
                        ((pi, "--recorded", "--after-format", "pi"), "score --recorded takes no AFTER")):
        bad = _score_cli(*args)
        lines = [ln for ln in bad.stderr.splitlines() if ln.startswith("ctxtool:")]
        assert bad.returncode == 2 and bad.stdout == "" and len(lines) == 1 and words in lines[0], bad.stderr


def test_score_recorded_finds_what_compactions_lists() -> None:
    """On the corpus sessions that recorded compactions, ``score --recorded`` scores as many as
    ``compactions`` lists. Not an independent count: both find the compactions with
    stats.compactions; this checks that the CLI's score path drops none of them."""
    import json

    from conftest import corpus_file

    for path in (corpus_file("pi", "pi_before-compaction.jsonl"), corpus_file("claude_code", "spotter_ae4a77f8_main.jsonl")):
        listed = subprocess.run([sys.executable, "-m", "ctxtool", "compactions", str(path), "--json"],
                                capture_output=True, text=True, timeout=120)
        assert listed.returncode == 0, listed.stderr
        n = json.loads(listed.stdout)["totals"]["compactions"]
        run = _score_cli(str(path), "--recorded", "--json")
        assert run.returncode == 0, run.stderr
        reps = json.loads(run.stdout)["transcripts"]
        assert n >= 1 and len(reps) == n
        assert all(r["probes"] > 0 and r["retention"] is not None for r in reps)
