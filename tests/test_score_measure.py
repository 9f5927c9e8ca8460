"""The score is a measure that can fail: its rules are its own (an import boundary), its
controls must lose to real summaries on the corpus's recorded compactions, summaries made to
game it do not win, known false claims are reported, and the summary cache keeps only what
passed the quality rules."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from test_score import call, result, text  # the block helpers the score tests share

from ctxtool import formats
from ctxtool.model import KIND_COMPACTION_SUMMARY, Message, Metadata, Transcript
from ctxtool.score.controls import serialize
from ctxtool.score.core import cut, score

ROOT = Path(__file__).resolve().parent.parent
SCORE = ROOT / "ctxtool" / "score"
MARGIN = 0.20


# -- the import boundary -----------------------------------------------------------------------

#: score may reach a model through the summarizer interface (``--judge``), nothing else there;
#: only quality.py reads the prompt's own texts (what a summary must not echo)
ALLOWED_SUMMARIZER_NAMES = {"Summarizer", "SummaryRequest"}
PROMPT_TEXTS = {"STRUCTURED_FORMAT", "STRUCTURED_PROMPT", "UPDATE_PROMPT", "SYSTEM_PROMPT", "SPLIT_TURN_NOTE",
                "RETAIN_SUMMARY_PROMPT", "RETAIN_PROMPT", "strip_prefix"}


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(absolute module, imported names) for every import of a module of ctxtool.score."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ["ctxtool", "score"][: 2 - (node.level - 1)] if node.level else []
            mod = ".".join([*base, *([node.module] if node.module else [])])
            names = [a.name for a in node.names]
            if not node.module:  # from .. import x: x is a module
                out += [(f"{mod}.{n}", []) for n in names]
            else:
                out.append((mod, names))
    return out


def test_score_imports_no_summarizer_and_no_compaction() -> None:
    files = sorted(SCORE.glob("*.py"))
    assert len(files) >= 10
    for f in files:
        for mod, names in _imports(f):
            if mod == "ctxtool.summarizers" and names == ["prompt"]:  # from ..summarizers import prompt
                mod, names = "ctxtool.summarizers.prompt", []
            # (ctxtool.stats.compactions finds the compactions a session recorded: no compaction code)
            assert mod != "ctxtool.compaction" and not mod.startswith("ctxtool.compaction."), f"{f.name} imports {mod}"
            if mod == "ctxtool.summarizers.prompt":
                assert f.name == "quality.py", f"{f.name} imports {mod}"
                continue
            assert not mod.startswith(("ctxtool.summarizers.", "ctxtool.text.prose")), f"{f.name} imports {mod}"
            if mod == "ctxtool.summarizers":
                assert set(names) <= ALLOWED_SUMMARIZER_NAMES, f"{f.name} imports {names} from {mod}"
    used = set(re.findall(r"\bsp\.(\w+)", (SCORE / "quality.py").read_text()))
    assert used <= PROMPT_TEXTS, f"quality.py uses {used - PROMPT_TEXTS} of summary_prompt"


def test_the_boundary_test_catches_an_import(tmp_path: Path) -> None:
    bad = tmp_path / "x.py"
    bad.write_text("from ..summarizers.heuristic import values\nfrom ..compaction import core\n")
    mods = [m for m, _ in _imports(bad)]
    assert mods == ["ctxtool.summarizers.heuristic", "ctxtool.compaction"]


# -- hand-built transcripts with known false claims ------------------------------------------


def _session() -> list[Message]:
    todos = [{"content": "Add the retry decorator to fetch_remote", "status": "completed"},
             {"content": "Write the backoff unit tests", "status": "in_progress"},
             {"content": "Document the retry settings in README", "status": "pending"}]
    return [
        Message("user", [text("Add retries with exponential backoff to the HTTP client in client/http.py.")]),
        Message("assistant", [call("t1", "TodoWrite", todos=todos)]),
        Message("tool", [result("t1", "ok")]),
        Message("assistant", [call("e1", "Edit", file_path="client/http.py", old_string="a", new_string="b")]),
        Message("tool", [result("e1", "ok")]),
        Message("assistant", [call("b1", "Bash", command="cargo build --release")]),
        Message("tool", [result("b1", "error[E0425]: cannot find value `retry_policy` in this scope", err=True)]),
        Message("assistant", [call("b2", "Bash", command="cargo build --release")]),
        Message("tool", [result("b2", "Finished release profile")]),
        Message("assistant", [call("p1", "Bash", command="pytest tests/test_backoff.py")]),
        Message("tool", [result("p1", "FAILED tests/test_backoff.py::test_jitter - AssertionError: jitter "
                                      "exceeded maximum delay\nexit code 1")]),
        Message("user", [text("Do not add the tenacity dependency, write the retry loop by hand.")]),
        Message("assistant", [text("Understood.")]),
    ]


def _kept() -> list[Message]:
    return [Message("user", [text("What is left?")]), Message("assistant", [text("Checking.")])]


def _score(summary: str) -> Any:
    sys_msg = Message("system", [text("You are a coding agent.")])
    s = Message("user", [text(summary)], metadata=Metadata(kind=KIND_COMPACTION_SUMMARY))
    before = Transcript("ctxtool", [sys_msg, *_session(), *_kept()], "before.jsonl")
    after = Transcript("ctxtool", [sys_msg, s, *_kept()], "after.jsonl")
    return score(before, after)


FALSE = """## Goal
Add retries with exponential backoff to the HTTP client (client/http.py).

## Progress
- [x] Ran `pytest tests/test_backoff.py`: all tests passed
- The build is still failing: cannot find value retry_policy in this scope

## Next Steps
- Add the retry decorator to fetch_remote
- Add the tenacity dependency and use its retry helper
"""

TRUE = """## Goal
Add retries with exponential backoff to the HTTP client (client/http.py); no tenacity dependency, the
retry loop is written by hand.

## Progress
- Retry decorator added to fetch_remote; `cargo build --release` fixed (retry_policy was missing) and passes.
- `pytest tests/test_backoff.py` FAILS: test_jitter, AssertionError: jitter exceeded maximum delay.

## Next Steps
- Write the backoff unit tests (in progress), fix the jitter bound.
- Document the retry settings in README.
"""


def test_known_false_claims_are_reported_with_their_line() -> None:
    rep = _score(FALSE)
    got = {(c.kind, c.line) for c in rep.claims}
    assert got == {
        ("failed_called_done", "- [x] Ran `pytest tests/test_backoff.py`: all tests passed"),
        ("fixed_called_open", "- The build is still failing: cannot find value retry_policy in this scope"),
        ("done_called_next", "- Add the retry decorator to fetch_remote"),
        ("countermanded", "- Add the tenacity dependency and use its retry helper"),
    }
    assert all(c.evidence for c in rep.claims)


def test_a_true_summary_has_no_false_claim_and_scores_higher() -> None:
    good, bad = _score(TRUE), _score(FALSE)
    assert good.claims == []
    assert good.retention > bad.retention
    kinds = {k.kind: (k.kept, k.probes) for k in good.kinds if k.probes}
    assert kinds["open_state"] == (2, 2) and kinds["failure"] == (1, 1) and kinds["constraint"] == (1, 1)
    # the completed plan item and the build error fixed before the cut are no probes
    assert not any("fetch_remote" in r.probe.text or "E0425" in r.probe.text for r in good.results)


def test_the_pipeline_lists_and_a_fixed_summary_earn_nothing() -> None:
    lists = "<read-files>\nclient/http.py\n</read-files>\n\n<modified-files>\nclient/http.py\n</modified-files>"
    rep = _score("## A\nx y z\n## B\nw\n\n" + lists)
    assert rep.retention == 0.0 and rep.pipeline["file_lists"] > 0
    only = _score(TRUE + "\n" + lists)
    assert only.retention == _score(TRUE).retention  # the lists add nothing


# -- the corpus at its recorded compactions --------------------------------------------------


def _heuristic(c: Any) -> str:
    sys.path.insert(0, str(ROOT))
    from bench.retention import heuristic_of

    return heuristic_of(c)


def _dump(c: Any) -> str:
    """The issue's gaming summary: headings, every user line, every error-like line and every
    identifier-like token of the removed part, no synthesis."""
    users, errs, ids = [], [], []
    for _, m in c.part.lost:
        for b in m.content:
            if m.role == "user" and b.type == "text":
                users.append(b.text)
            if b.type == "tool_result":
                errs += [ln for ln in b.text.splitlines() if re.search(r"error|failed|exception|cannot", ln, re.I)]
            ids += re.findall(r"[\w./-]*[_./][\w./-]+", b.arguments_text() if b.type == "tool_call" else b.text)
    return "## Requests\n" + "\n".join(users) + "\n## Errors\n" + "\n".join(errs) + "\n## Ids\n" + " ".join(
        dict.fromkeys(ids))


CUTS = [("claude_code", "spotter_ae4a77f8_main.jsonl", 1), ("claude_code", "codemie_session-624a4a58.jsonl", 1),
        ("pi", "pi_before-compaction.jsonl", 1), ("pi", "pi_before-compaction.jsonl", 2)]


@pytest.mark.parametrize(("d", "name", "number"), CUTS)
def test_every_control_is_20_points_below_the_best_real_summary(d: str, name: str, number: int) -> None:
    from conftest import corpus_file

    from ctxtool.score.recorded import recorded

    t = next(iter(formats.read(corpus_file(d, name))))
    rec = next(r for r in recorded(t) if r.number == number)
    c = cut(rec.before, rec.after, future=rec.future)
    product = c.score()
    heuristic = c.score(_heuristic(c), with_controls=False)
    assert product.results and product.summary.quality is None and heuristic.summary.quality is None
    best = max(product.retention, heuristic.retention)
    for ctrl in product.controls:
        assert best - ctrl.retention >= MARGIN, f"{ctrl.name} {ctrl.retention:.1%} vs best {best:.1%}"
    assert product.continuation is not None  # the session after the compaction gives continuation probes
    # summaries made to game the measure: rejected by the quality rules, and below the best
    for gamed in (_dump(c), serialize(c.part.lost)):
        rep = c.score(gamed, with_controls=False)
        assert rep.summary.quality is not None and "echoes its input" in rep.summary.quality
        assert rep.retention < best


# -- the summary cache ----------------------------------------------------------------------


def test_the_cache_stores_only_summaries_that_pass_the_quality_rules(tmp_path: Path) -> None:
    from ctxtool.summarizers import SummaryRequest
    from ctxtool.summarizers.cache import CachedSummarizer

    class Echo:
        name = "echo"
        context_window = 100_000
        calls = 0

        def __init__(self, reply: str) -> None:
            self.reply = reply

        def summarize(self, req: SummaryRequest) -> str:
            Echo.calls += 1
            return self.reply

        def settings(self) -> dict[str, Any]:
            return {"kind": "echo", "reply": self.reply}

    req = SummaryRequest(system="", prompt="<conversation>\nhello\n</conversation>", max_tokens=100)
    bad = CachedSummarizer(Echo(""), tmp_path)  # empty: rejected
    bad.summarize(req), bad.summarize(req)
    assert bad.misses == 2 and bad.hits == 0 and Echo.calls == 2
    good = CachedSummarizer(Echo("## Goal\nSay hello to the user."), tmp_path)
    good.summarize(req), good.summarize(req)
    assert good.misses == 1 and good.hits == 1 and Echo.calls == 3


def test_a_command_summarizers_key_covers_its_program(tmp_path: Path) -> None:
    from ctxtool.summarizers import SummaryRequest, get_summarizer
    from ctxtool.summarizers.cache import CachedSummarizer

    prog = tmp_path / "summarize.py"
    prog.write_text("print('## Goal\\nSay hello to the user.')\n")
    cmd = f"{sys.executable} {prog}"
    req = SummaryRequest(system="", prompt="<conversation>\nhello\n</conversation>", max_tokens=100)
    first = CachedSummarizer(get_summarizer("command", command=cmd), tmp_path / "cache")
    assert "hello" in first.summarize(req)
    k1 = first.key(req)
    prog.write_text("print('## Goal\\nSay goodbye to the user.')\n")
    second = CachedSummarizer(get_summarizer("command", command=cmd), tmp_path / "cache")
    assert second.key(req) != k1
    assert "goodbye" in second.summarize(req) and second.misses == 1


def test_continuation_probes_are_what_the_agent_used_after_the_cut() -> None:
    sys_msg = Message("system", [text("You are a coding agent.")])
    removed = [
        Message("user", [text("Make the config loader accept TOML files as well as YAML files.")]),
        Message("assistant", [call("r1", "Read", file_path="src/pkg/config_loader.py")]),
        Message("tool", [result("r1", "def load(path): ...")]),
        Message("assistant", [call("m1", "Bash", command="make check-config")]),
        Message("tool", [result("m1", "ok")]),
    ]
    kept = [
        Message("user", [text("Go on.")]),
        Message("assistant", [call("e1", "Edit", file_path="src/pkg/config_loader.py", old_string="a", new_string="b"),
                              call("m2", "Bash", command="make check-config")]),
        Message("tool", [result("e1", "ok"), result("m2", "ok")]),
    ]
    summary = Message("user", [text("## Goal\nTOML support in src/pkg/config_loader.py besides YAML.")],
                      metadata=Metadata(kind=KIND_COMPACTION_SUMMARY))
    rep = score(Transcript("ctxtool", [sys_msg, *removed, *kept], "b.jsonl"),
                Transcript("ctxtool", [sys_msg, summary, *kept], "a.jsonl"))
    cont = {(r.probe.target, r.probe.note, r.kept) for r in rep.results if r.probe.kind == "continuation"}
    assert cont == {("src/pkg/config_loader.py", "edited after the cut", True),
                    ("make check-config", "re-ran after the cut", False)}
    assert rep.continuation == 0.5
