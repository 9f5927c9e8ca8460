"""Issue 31: a summary a fresh agent can continue from. Each defect on a hand-built transcript
and, where it was seen, on the corpus session (skipped cleanly without the corpus)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import corpus_file
from test_compact import write_chat, write_dataset

from ctxtool import formats
from ctxtool.compaction.core import compact_transcript
from ctxtool.compaction.settings import CompactOptions
from ctxtool.compaction.view import context_view
from ctxtool.model import Block, Message, Transcript
from ctxtool.summarizers import prompt as sp
from ctxtool.summarizers.heuristic import structured_summary
from ctxtool.summarizers.heuristic.text import parse_sections
from ctxtool.tokens.count import get_tokenizer

ROOT = Path(__file__).resolve().parent.parent


def tc(cid: str, name: str, **args: Any) -> Block:
    return Block("tool_call", id=cid, name=name, arguments=args)


def tr(cid: str, text: str, error: bool = False) -> Block:
    return Block("tool_result", id=cid, text=text, is_error=error)


def user(text: str) -> Message:
    return Message("user", [Block("text", text=text)])


def said(text: str, *calls: Block) -> Message:
    return Message("assistant", [Block("text", text=text), *calls] if text else list(calls))


def results(*blocks: Block) -> Message:
    return Message("tool", list(blocks))


def ctxtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ctxtool", *map(str, args)], capture_output=True, text=True, cwd=ROOT)


def corpus(*parts: str) -> Transcript:
    return next(iter(formats.read(corpus_file(*parts))))


# -- 1. no growth, no failure ----------------------------------------------------------------------
def test_a_dataset_record_that_would_grow_is_written_unchanged(tmp_path: Path) -> None:
    src = tmp_path / "ds.jsonl"
    write_dataset(src, n=3)
    with src.open("a") as fh:  # a short record: its summary is larger than what it replaces
        fh.write(json.dumps({"id": "tiny", "messages": [
            {"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello."},
            {"role": "user", "content": "Please fix the failing test in src/app.py, keep the API. " + "Context line. " * 200},
            {"role": "assistant", "content": "On it."}]}) + "\n")
    out = tmp_path / "o.jsonl"
    r = ctxtool("compact", src, "-o", out, "--force", "--keep-recent-tokens", "500", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    by_id = {x["id"]: x for x in d["transcripts"]}
    tiny = by_id["tiny"]
    assert tiny["status"] == "not_smaller" and "would not be smaller" in tiny["reason"]
    assert tiny["tokens_after"] == tiny["tokens_before"]
    assert d["totals"]["not_smaller"] == 1 and d["totals"]["compacted"] == 3
    lines = out.read_text().splitlines()
    assert json.loads(lines[-1]) == json.loads(src.read_text().splitlines()[-1])  # unchanged, byte for byte in JSON


def test_samples_directory_compacts_without_failing(tmp_path: Path) -> None:
    """`compact samples/ -o out/`: cline_api_conversation_history.json (and other short files)
    would not get smaller at a small --keep-recent-tokens; they are left unchanged, exit 0."""
    r = ctxtool("compact", ROOT / "samples", "-o", f"{tmp_path / 'out'}/", "--force", "--keep-recent-tokens", "100")
    assert r.returncode == 0, r.stderr
    assert "left unchanged: the compacted transcript would not be smaller" in r.stdout
    assert (tmp_path / "out" / "cline_api_conversation_history.json").is_file()


def test_a_model_failure_still_exits_6(tmp_path: Path) -> None:
    src = write_chat(tmp_path / "c.json")
    r = ctxtool("compact", src, "-o", tmp_path / "o.json", "--force", "--keep-recent-tokens", "400", "--summarizer", "command",
                "--command",
                f"{sys.executable} -c 'import sys; sys.exit(3)'")
    assert r.returncode == 6 and not (tmp_path / "o.json").exists()


# -- 2. claims only with evidence --------------------------------------------------------------
def test_error_text_fails_a_run_whatever_its_exit_status() -> None:
    msgs = [user("Fix the types."),
            said("", tc("1", "Bash", command="npm run check 2>&1 | head -40")),
            results(tr("1", "src/app.ts(3,7): error TS2304: Cannot find name 'Foo'.\n"
                            "src/b.ts(1,1): error TS2307: Cannot find module './x'.\nExit code 0")),
            said("", tc("2", "Bash", command="cargo build")),
            results(tr("2", "error: could not compile `x`")),
            said("", tc("3", "Bash", command="uv run pytest -q")),
            results(tr("3", "FAILED tests/test_a.py::test_b - assert 1 == 2\n1 failed, 3 passed"))]
    s = structured_summary(msgs)
    assert "[x]" not in s and ": ok" not in s
    prog = parse_sections(s)["Progress"]
    assert "`npm run check 2>&1 | head -40`: FAILED: src/app.ts(3,7): error TS2304: Cannot find name 'Foo'." in prog
    assert "`cargo build`: FAILED: error: could not compile `x`" in prog
    assert "`uv run pytest -q`: FAILED: FAILED tests/test_a.py::test_b - assert 1 == 2" in prog


def test_a_failure_is_resolved_only_by_a_later_success_of_the_same_step() -> None:
    msgs = [user("Make it build."),
            said("", tc("1", "Bash", command="make build")), results(tr("1", "Error: missing header\nexit code 2")),
            said("", tc("2", "Bash", command="ls")), results(tr("2", "a b")),
            said("", tc("3", "Bash", command="python -c 'print(1)'")), results(tr("3", "1"))]
    secs = parse_sections(structured_summary(msgs))
    assert "`make build`: FAILED: Error: missing header" in secs["Progress"]
    assert "resolved" not in secs["Progress"] and "Resolve: `make build` failed: Error: missing header" in secs["Next Steps"]
    msgs += [said("", tc("4", "Bash", command="make build")), results(tr("4", "built ok\nProcess exited with code 0"))]
    secs = parse_sections(structured_summary(msgs))
    assert "`make build`: ok (exit 0): built ok" in secs["Progress"]
    assert "`make build` failed earlier (Error: missing header); resolved: a later run succeeded" in secs["Progress"]
    assert "Resolve:" not in secs["Next Steps"]


def test_a_failed_commit_is_not_done_and_a_later_commit_resolves_a_failed_add() -> None:
    msgs = [user("Commit the work."),
            said("", tc("1", "Bash", command="git add -A && git commit -m 'feat: tracing'")),
            results(tr("1", "Pre-commit validation failed:\nlib/otel.ex:57:13:pattern_match The pattern can never match",
                       True)),
            said("", tc("2", "Bash", command="git add lib/x.ex")),
            results(tr("2", "fatal: pathspec 'lib/x.ex' did not match any files", True)),
            said("Fixed the pattern.", tc("3", "Edit", file_path="lib/otel.ex", old_string="a", new_string="b")),
            results(tr("3", "ok")),
            said("", tc("4", "Bash", command="git commit -am 'feat: tracing'")),
            results(tr("4", "[main 1a2b3c4] feat: tracing\n 1 file changed, 2 insertions(+)"))]
    secs = parse_sections(structured_summary(msgs))
    prog = secs["Progress"]
    assert '- [x] Committed 1a2b3c4: "feat: tracing" (`lib/otel.ex`)' in prog
    assert "git add -A && git commit" not in prog.split("### Failures resolved")[0]  # not done, not blocked
    assert "### Blocked" not in prog and "Resolve:" not in secs["Next Steps"]


def test_a_countermanded_pending_call_is_not_a_next_step() -> None:
    msgs = [user("Add a nord theme."),
            said("", tc("1", "Write", file_path="themes/nord.json", content="{}")), results(tr("1", "ok")),
            user("remove the nord.json, we do not need it"),
            said("Removing it.", tc("2", "Edit", file_path="themes/nord.json", old_string="{}", new_string="{ }"))]
    steps = parse_sections(structured_summary(msgs, open_calls=["Edit({\"file_path\": \"themes/nord.json\"})"]))["Next Steps"]
    assert "nord.json" not in steps


# -- 3. state from structure --------------------------------------------------------------------
def test_current_subtask_and_remaining_steps_from_the_plan_tool() -> None:
    msgs = [user("Work on the epic."),
            said("", tc("1", "TodoWrite", todos=[{"content": "a0y.3 wire the API", "status": "completed"},
                                                  {"content": "a0y.4 LiveView wiring", "status": "in_progress"},
                                                  {"content": "a0y.5 docs", "status": "pending"}])),
            results(tr("1", "ok")),
            user("continue until all are done")]
    secs = parse_sections(structured_summary(msgs))
    assert "Current subtask (in progress in the plan): a0y.4 LiveView wiring" in secs["Current State"]
    assert "Continue with the latest request" not in secs["Next Steps"]
    steps = secs["Next Steps"]
    assert "Continue (plan): a0y.4 LiveView wiring" in steps and "Then (plan): a0y.5 docs" in steps
    assert "a0y.3" not in steps  # done is not next
    assert "- [x] a0y.3 wire the API" in secs["Progress"]


def test_without_a_plan_record_the_last_written_plan_is_marked_as_such() -> None:
    msgs = [user("Refactor the modes."),
            said("Here is the plan:\n1. Extract the shared loop\n2. Port print mode\n3. Port rpc mode\n\nStarting now.")]
    st = parse_sections(structured_summary(msgs))["Current State"]
    assert "Last plan the assistant wrote (in its text; no plan tool recorded one):" in st
    assert "1. Extract the shared loop" in st and "3. Port rpc mode" in st


def test_the_latest_request_and_what_happened_after_it() -> None:
    msgs = [user("Add retries."), said("", tc("1", "Edit", file_path="/repo/src/http.py", old_string="a", new_string="b")),
            results(tr("1", "ok")),
            said("", tc("2", "Bash", command="git commit -am 'feat: retries'")), results(tr("2", "[main abcdef1] feat: retries"))]
    secs = parse_sections(structured_summary(msgs, cwd="/repo"))
    assert 'worked on after it: committed "feat: retries"; 1 file edit step(s)' in secs["Current State"]
    assert "- `src/http.py`" in secs["Files Changed"] and "/repo/" not in secs["Files Changed"]  # relative to the cwd


def test_spotter_product_cut_state_from_the_tracker() -> None:
    """At Claude Code's own compaction of spotter, its TodoWrite calls hold the current subtask."""
    from ctxtool.score.core import cut
    from ctxtool.score.recorded import recorded

    t = corpus("claude_code", "spotter_ae4a77f8_main.jsonl")
    rec = next(iter(recorded(t)))
    lost = [m for _, m in cut(rec.before, rec.after, future=rec.future).part.lost]  # what the product removed
    s = structured_summary(sp.summary_input(lost))
    secs = parse_sections(s)
    # the session tracks its subtasks with beads (`bd update ID --status in_progress`, `bd close ID`)
    assert "- [x] spotter-4te.3: Instrument hook controllers with trace correlation and error spans" in secs["Progress"]
    assert "Plan: 3 of 3 items completed" in secs["Current State"]
    # ... while the commit of spotter-4te.3 failed on its pre-commit hook: blocked, never done
    assert "failed (×7): Pre-commit validation failed" in secs["Progress"].split("### Blocked")[1]
    assert not any(ln.startswith("- [x] Ran `git add -A && git commit") for ln in s.splitlines())


# -- 4. goal and decisions ---------------------------------------------------------------------------
def test_slash_commands_and_task_notifications_are_not_the_goal() -> None:
    msgs = [user("/mode"), user("<task-notification>\n<task-id>x</task-id>\nBackground task done\n</task-notification>"),
            user("Make the sync incremental."), said("Sure.")]
    secs = parse_sections(structured_summary(msgs))
    assert secs["Goal"].startswith("- Make the sync incremental.")
    assert "/mode" not in structured_summary(msgs) and "task-notification" not in structured_summary(msgs)


def test_decisions_are_choices_not_hypotheses_or_complaints() -> None:
    msgs = [user("Fix the cache."),
            said("Maybe the issue is that the cache isn't being cleared? This piecemeal approach is a mess. "
                 "Option A: a TTL. Option B: explicit invalidation."),
            user("ok, i hope i haven't lost you by compacting"),
            said("Not at all. Option A: a TTL. Option B: explicit invalidation."),
            user("let's go with explicit invalidation"),
            said("I'll use explicit invalidation instead of a TTL because writes are rare. "
                 "The TTL design was rejected because it serves stale reads.")]
    dec = parse_sections(structured_summary(msgs))["Key Decisions"]
    assert "Maybe the issue" not in dec and "piecemeal" not in dec and "lost you" not in dec
    assert '**Decided** (the user: "let\'s go with explicit invalidation") on: Option B: explicit invalidation.' in dec
    assert "**Decided**: I'll use explicit invalidation instead of a TTL" in dec
    assert "**Rejected**: The TTL design was rejected" in dec


# -- 5. a previous summary reconciled ----------------------------------------------------------------
def test_an_item_the_previous_summary_called_next_that_was_done_since_is_done() -> None:
    prev = ("## Goal\n- Refactor the run modes\n\n## Progress\n### Done\n- [x] WP13: extract the loop\n\n"
            "## Next Steps\n1. WP14: Create main-new.ts (NEXT)\n2. WP15: port the rpc mode\n")
    msgs = [user("go on"), said("Creating it.", tc("1", "Write", file_path="src/main-new.ts", content="x")),
            results(tr("1", "ok"))]
    s = structured_summary(msgs, prev)
    assert "WP14: Create main-new.ts (NEXT)" not in s
    assert "(from the earlier summary) WP15: port the rpc mode" in parse_sections(s)["Next Steps"]


def test_pi_second_compaction_reconciles_wp14() -> None:
    from ctxtool.score.recorded import recorded

    t = corpus("pi", "pi_before-compaction.jsonl")
    recs = list(recorded(t))
    assert len(recs) >= 2
    v = context_view(t, get_tokenizer("heuristic"))
    s = structured_summary(v.effective, v.previous_summary)
    for ln in s.splitlines():
        if "WP14" in ln and "main-new.ts" in ln:
            assert "(NEXT)" not in ln or "[x]" in ln, ln


# -- 6. files, identifiers, paths -------------------------------------------------------------------
def test_no_keywords_as_functions_and_no_junk_paths() -> None:
    msgs = [user("Tidy the module."),
            said("I'll check `/clear`, `start_session/2`, `/Users/badlogic` and `open(packages/tui/test/markdown.test.ts,` "
                 "then `src/real/path.ts`.",
                 tc("1", "Edit", file_path="src/a.ts", old_string="x",
                    new_string="class with {}\nfunction for() {}\nimport x\ntype Foo = 1\nfunction parseArgs() {}")),
            results(tr("1", "ok"))]
    s = structured_summary(msgs)
    ctx = parse_sections(s)["Critical Context"]
    assert "`Foo`" in ctx and "`parseArgs`" in ctx
    for junk in ("`with`", "`for`", "`import`", "`/clear`", "`start_session/2`", "`/Users/badlogic`", "open(packages"):
        assert junk not in ctx, junk
    assert "`src/real/path.ts`" in ctx


def test_each_changed_file_once_with_its_reason() -> None:
    msgs = [user("Add retries."),
            said("The client needs a retry loop around send().", tc("1", "Edit", file_path="src/http.py", old_string="a",
                                                                      new_string="b")),
            results(tr("1", "ok")),
            said("Now let me add the option to the config.", tc("2", "Edit", file_path="src/http.py", old_string="b",
                                                                 new_string="c")),
            results(tr("2", "ok"))]
    fc = parse_sections(structured_summary(msgs))["Files Changed"]
    assert fc.count("src/http.py") == 1
    assert "The client needs a retry loop around send()." in fc and "Add the option to the config." in fc


# -- 7. a budget --------------------------------------------------------------------------------------
def test_the_budget_is_kept_and_older_requests_are_shortened_first() -> None:
    msgs: list[Message] = []
    for i in range(30):
        msgs += [user(f"Request {i}: " + "please handle this case carefully " * 30), said(f"Handled {i}.")]
    for budget in (600, 1500, 3000):
        s = structured_summary(msgs, budget=budget)
        assert len(s) <= budget * 4 * 1.05, budget
        reqs = parse_sections(s)["User Requests"]
        assert "Request 29: " + "please handle this case carefully " * 5 in reqs  # the latest, whole
        assert "left out for the summary budget" in reqs or "[shortened from" in reqs
    s = structured_summary(msgs, budget=3000)
    assert "[shortened from" in parse_sections(s)["User Requests"]


def test_summary_budget_option(tmp_path: Path) -> None:
    src = write_chat(tmp_path / "c.json", turns=30)
    outs = {}
    for b in ("500", "3000"):
        r = ctxtool("compact", src, "-o", tmp_path / f"o{b}.json", "--force", "--keep-recent-tokens", "200",
                    "--summary-budget", b, "--json")
        assert r.returncode == 0, r.stderr
        outs[b] = json.loads(r.stdout)["transcripts"][0]["summary_tokens"]
    assert outs["500"] < outs["3000"]


def test_corpus_summaries_fit_the_default_budget() -> None:
    for parts in (("claude_code", "spotter_ae4a77f8_main.jsonl"), ("pi", "pi_before-compaction.jsonl"),
                  ("claude_code", "codemie_session-624a4a58.jsonl")):
        t = corpus(*parts)
        o = compact_transcript(t, None, CompactOptions(force=True, keep_recent_tokens=2000))
        body = sp.strip_file_lists(sp.strip_prefix(o.summary or ""))
        assert len(body) <= sp.SUMMARY_BUDGET * 4 * 1.05, parts
        assert not re.search(r"^- \[x\].*failed", body, re.M)


# -- 8. model summaries anchored on the facts --------------------------------------------------------
FALSE_REPLY = ("## Goal\nFix the type errors in src/app.ts.\n\n## Progress\n### Done\n- [x] `npm run build` passes now\n"
               "- [x] edited src/app.ts\n\n## Next Steps\n1. Create nord.json for the theme\n")
TRUE_REPLY = ("## Goal\nFix the type errors in src/app.ts.\n\n## Progress\n### Blocked\n- npm run build still fails: "
              "error TS2304: Cannot find name 'Foo'\n\n## Next Steps\n1. Declare Foo in src/types.ts\n")


def failing_build_chat(path: Path) -> Path:
    from test_compact import call

    filler = "context line for the build log\n" * 120
    msgs: list[dict[str, Any]] = [
        {"role": "user", "content": "Fix the type errors in src/app.ts. Do not create nord.json."},
        {"role": "assistant", "content": "Running the build.", "tool_calls": [call("b1", "bash", command="npm run build")]},
        {"role": "tool", "tool_call_id": "b1", "content": filler + "src/app.ts(3,7): error TS2304: Cannot find name 'Foo'.\n"},
        {"role": "assistant", "content": "Editing the import.",
         "tool_calls": [call("e1", "edit_file", path="src/app.ts", old="a", new="b")]},
        {"role": "tool", "tool_call_id": "e1", "content": "edited"},
        {"role": "assistant", "content": "Rebuilding.", "tool_calls": [call("b2", "bash", command="npm run build")]},
        {"role": "tool", "tool_call_id": "b2", "content": filler + "src/app.ts(3,7): error TS2304: Cannot find name 'Foo'.\n"},
        {"role": "user", "content": "Keep going, " + "and explain what you find. " * 60},
        {"role": "assistant", "content": "Looking at the types next. " * 60},
    ]
    path.write_text(json.dumps(msgs))
    return path


def _remote(kind: str, llm: Any) -> Any:
    from ctxtool.summarizers import get_summarizer

    return get_summarizer(kind, base_url=llm.base_url(kind), model="m", api_key="k", retries=0, backoff_base=0.001)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_a_model_summary_is_handed_the_facts_and_checked_against_them(kind: str, tmp_path: Path) -> None:
    from fake_llm import FakeLLM

    from ctxtool.compaction.run import compact_file

    src = failing_build_chat(tmp_path / "c.json")
    options = CompactOptions(force=True, keep_recent_tokens=300)
    with FakeLLM(reply=FALSE_REPLY) as llm:
        rep = compact_file(src, tmp_path / "o.json", options=options, summarizer=_remote(kind, llm))
        prompt = llm.requests[0].prompt
    assert "<facts>" in prompt and "- `npm run build`: FAILED: src/app.ts(3,7): error TS2304" in prompt
    assert "never call a failed run ok" in prompt and "## Current State" in prompt
    r = rep.records[0]
    assert r.status == "compacted"  # reported, not rejected, unless asked
    kinds = {d["kind"] for d in r.disagreements}
    assert "failed_called_done" in kinds and "countermanded" in kinds
    assert any("npm run build` passes" in d["line"] for d in r.disagreements)
    with FakeLLM(reply=TRUE_REPLY) as llm:
        rep = compact_file(src, tmp_path / "o2.json", options=options, summarizer=_remote(kind, llm))
    assert rep.records[0].disagreements == []


def test_false_claims_can_reject_a_model_summary(tmp_path: Path) -> None:
    from fake_llm import FakeLLM

    src = failing_build_chat(tmp_path / "c.json")
    with FakeLLM(reply=FALSE_REPLY) as llm:
        common = ["compact", src, "--force", "--keep-recent-tokens", "300", "--summarizer", "openai", "--summary-model", "m",
                  "--base-url", llm.openai_base, "--no-cache", "--max-false-claims", "0", "--json"]
        r = ctxtool(*common, "-o", tmp_path / "o.json")
        assert r.returncode == 6 and "claim(s) the transcript's records contradict" in r.stderr
        assert not (tmp_path / "o.json").exists()
        r = ctxtool(*common, "--fallback", "-o", tmp_path / "o2.json")
    assert r.returncode == 0, r.stderr
    item = json.loads(r.stdout)["transcripts"][0]
    assert item["fallback_used"] and item["disagreements"][0]["kind"] == "failed_called_done"


def test_command_backend_is_checked_too(tmp_path: Path) -> None:
    src = failing_build_chat(tmp_path / "c.json")
    reply = tmp_path / "reply.md"
    reply.write_text(FALSE_REPLY)
    prog = tmp_path / "say.py"
    prog.write_text(f"import sys\nsys.stdin.read()\nsys.stdout.write(open({str(reply)!r}).read())\n")
    r = ctxtool("compact", src, "-o", tmp_path / "o.json", "--force", "--keep-recent-tokens", "300", "--summarizer",
                "command", "--command", f"{sys.executable} {prog}", "--json", "--no-cache")
    assert r.returncode == 0, r.stderr
    item = json.loads(r.stdout)["transcripts"][0]
    assert "failed_called_done" in {d["kind"] for d in item["disagreements"]}
