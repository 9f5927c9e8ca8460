"""The heuristic summarizer: seed 003's structured summary, built from the transcript itself."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from conftest import corpus_file

from ctxtool import formats
from ctxtool.compaction.core import Outcome, compact_transcript
from ctxtool.compaction.settings import CompactOptions
from ctxtool.compaction.view import context_view
from ctxtool.model import Block, Message, Transcript
from ctxtool.summarizers import get_summarizer
from ctxtool.summarizers import prompt as sp
from ctxtool.summarizers.heuristic import structured_summary
from ctxtool.summarizers.heuristic.previous import fit, parse_previous
from ctxtool.summarizers.heuristic.requests import collect
from ctxtool.summarizers.heuristic.text import items, parse_sections, quote
from ctxtool.tokens.count import get_tokenizer

SECTIONS = ["Goal", "Current State", "User Requests", "Constraints & Preferences", "Progress", "Key Decisions",
            "Files Changed", "Next Steps", "Critical Context", "Read Set"]
BIG = 50_000  # a budget nothing is left out for


def tc(cid: str, name: str, **args: Any) -> Block:
    return Block("tool_call", id=cid, name=name, arguments=args)


def tr(cid: str, text: str, error: bool = False) -> Block:
    return Block("tool_result", id=cid, text=text, is_error=error)


def session() -> list[Message]:
    return [
        Message("user", [Block("text", text="Add retry support to the HTTP client in src/http.py. "
                                            "Do not add new dependencies. Always keep the tests green.")]),
        Message("assistant", [Block("text", text="I'll read the client first."), tc("1", "Read", file_path="src/http.py")]),
        Message("tool", [tr("1", "class Client: ...")]),
        Message("assistant", [tc("2", "Edit", file_path="src/http.py", old_string="a", new_string="b")]),
        Message("tool", [tr("2", "ok")]),
        Message("assistant", [tc("3", "Bash", command="pytest -q tests/test_http.py")]),
        Message("tool", [tr("3", "E   AssertionError: retries=3 expected\nFAILED tests/test_http.py::test_retry", True)]),
        Message("assistant", [Block("text", text="The cause is the backoff starting at zero. I decided to use "
                                                 "exponential backoff because the server rate-limits.")]),
        Message("user", [Block("text", text="Also make the retry count configurable; prefer an env var.")]),
        Message("assistant", [Block("text", text="Next, I'll add CTX_RETRIES."),
                              tc("4", "Write", file_path="src/config.py", content="RETRIES = 3")]),
    ]


def test_structured_sections_and_content() -> None:
    s = structured_summary(session(), open_calls=["Write({...})"])
    secs = parse_sections(s)
    assert [x for x in SECTIONS if x in secs] == list(secs)
    assert "Add retry support to the HTTP client in src/http.py" in secs["Goal"]
    assert "Also make the retry count configurable" in secs["User Requests"]  # later requests, in order
    assert '"Do not add new dependencies."' in secs["Constraints & Preferences"]
    assert "prefer an env var" in secs["Constraints & Preferences"]
    prog = secs["Progress"]
    assert "### Done" in prog and "[x] Edit: `src/http.py`" in prog
    # the last run's result, with the line that says why (not the output's last line); never done
    assert "`pytest -q tests/test_http.py`: FAILED: E AssertionError: retries=3 expected" in prog
    assert "[x] Ran `pytest" not in prog
    assert "src/config.py" not in prog  # the pending call is not done
    assert "Latest user request (request 2 under User Requests)" in secs["Current State"]
    assert "Where the assistant stopped: Next, I'll add CTX_RETRIES." in secs["Current State"]
    assert "exponential backoff" in secs["Key Decisions"]
    assert "pending tool call Write" in secs["Next Steps"]
    assert "Resolve: `pytest -q tests/test_http.py` failed" in secs["Next Steps"]
    assert "`src/http.py`" in secs["Files Changed"]


def test_resolved_failure_is_not_blocked() -> None:
    msgs = session()[:7] + [
        Message("assistant", [tc("5", "Bash", command="pytest -q tests/test_http.py")]),
        Message("tool", [tr("5", "3 passed")]),
    ]
    secs = parse_sections(structured_summary(msgs))
    assert "### Blocked" not in secs["Progress"] and "Resolve:" not in secs["Next Steps"]
    assert "`pytest -q tests/test_http.py`: ok: 3 passed" in secs["Progress"]
    assert "resolved: a later run succeeded" in secs["Progress"]


def test_deterministic() -> None:
    assert structured_summary(session()) == structured_summary(session())


def test_incremental_merges_previous_sections() -> None:
    first = structured_summary(session()[:8])
    second = structured_summary(session()[8:], first)
    secs = parse_sections(second)
    assert "Add retry support" in secs["Goal"]  # the earlier goal is preserved
    assert "Do not add new dependencies" in secs["Constraints & Preferences"]
    assert "Edit: `src/http.py`" in secs["Progress"]  # earlier progress carried over
    assert "`src/http.py`" in secs["Files Changed"]
    assert "exponential backoff" in secs["Key Decisions"]


def test_free_form_previous_summary_is_kept() -> None:
    prev = "This session is being continued. Earlier: migrated the database to v2 and fixed login."
    s = structured_summary(session()[8:], prev)
    assert "### Earlier: Summary" in s and "migrated the database to v2" in s
    again = structured_summary(session()[:2], s)
    assert "migrated the database to v2" in again  # carried across rounds


def test_injected_context_is_not_the_goal() -> None:
    msgs = [
        Message("user", [Block("text", text="# AGENTS.md instructions for /repo\nALWAYS run the linter before committing.")]),
        Message("user", [Block("text", text="Rename foo to bar everywhere.")]),
        Message("assistant", [Block("text", text="Done.")]),
    ]
    secs = parse_sections(structured_summary(msgs))
    assert secs["Goal"].startswith("- Rename foo to bar")
    # injected content is never a request nor a constraint (standing rules are kept with --pin)
    assert "ALWAYS run the linter" not in secs.get("Constraints & Preferences", "")


def test_readonly_commands_are_exploration_not_progress() -> None:
    msgs = [
        Message("user", [Block("text", text="Look around the repo.")]),
        Message("assistant", [tc("1", "exec_command", cmd="rg -n 'a|b' src | head"), tc("2", "exec_command", cmd="make build > log.txt")]),
        Message("tool", [tr("1", "x"), tr("2", "ok")]),
    ]
    secs = parse_sections(structured_summary(msgs))
    assert "make build" in secs["Progress"] and "rg -n" not in secs["Progress"]
    assert "Explored with 1 read-only commands" in secs["Progress"]


def test_summarizer_protocol_and_retain_style() -> None:
    h = get_summarizer("heuristic")
    assert h.name == "heuristic" and h.settings()["kind"] == "heuristic"
    po = sp.PromptOptions(style="retain", retain_directives=("the ticket id",))
    req = sp.build_request(sp.summary_input(session()), None, po)
    text = h.summarize(req)
    retain, summary = sp.parse_retain(text)
    assert "(directive) the ticket id" in retain and summary.startswith("## Goal")
    req2 = sp.build_request(sp.summary_input(session()), None, sp.PromptOptions())
    assert h.summarize(req2).startswith("## Goal")
    json.dumps(req2.options)  # request options stay JSON-serializable (the cache key)


# -- issue 13: a summary worth handing over (hand-built; the corpus cases follow) -----------------
CC_SUMMARY = """This session is being continued from a previous conversation that ran out of context. The conversation is summarized below:
Analysis:
Let me chronologically analyze the conversation:

1. **Initial Request**: the user asked to make the sync incremental.
2. **User Correction #1**: "it's not a jsonl file, it's json with a syncState"

Summary:
1. Primary Request and Intent:
   - Make conversation sync incremental (track the last synced message)
   - Don't overcomplicate: match the metrics error handling

2. Key Technical Concepts:
   - `processedRecordIds`: message UUIDs already tracked

3. Files and Code Sections:
   ### File: `src/types.ts`
   ```typescript
   ## not a heading: inside a fence
   conversationId?: string;
   ```

4. Errors and fixes:
   - Proposed a JSONL union type: rejected by the user

5. Problem Solving:
   Reuse processedRecordIds instead of a new field.

6. All user messages:
   - "review old and current implementation for claude metrics"
   - "don't overcomplicate"

7. Pending Tasks:
   - Simplify Phase 4.1

8. Current Work:
   Reading metrics-processor.ts for its error handling.

9. Optional Next Step:
   Rewrite the Phase 4.1 section with a try-catch-finally.
"""


def carried_whole(text: str, summary: str) -> bool:
    """Every line of a carried section in ``summary``, quoted: as written, or (an open item
    later work did) ticked with the record that shows it done."""
    ticked = [ln for ln in summary.splitlines() if "(done since: " in ln]
    for ln in quote(text):
        core = re.sub(r"^>\s*(?:[-*]|\d+\.)\s+", "", ln).strip()
        if ln not in summary.splitlines() and not any(core[:40] in t for t in ticked):
            return False
    return True


def cc_body(title: str) -> str:
    """One numbered section's body of CC_SUMMARY, as written there."""
    after = CC_SUMMARY.split(f". {title}:\n", 1)[1]
    return re.split(r"\n\n\d\. ", after, maxsplit=1)[0].rstrip("\n")


def test_claude_code_summary_is_carried_whole_and_mapped() -> None:
    s = structured_summary(session()[8:], CC_SUMMARY, budget=BIG)
    secs = parse_sections(s)
    assert "(no user request" not in secs["Goal"] and "characters omitted" not in s
    for title, section in (("Primary Request and Intent", "Goal"), ("All user messages", "Goal"),
                           ("Pending Tasks", "Next Steps"), ("Optional Next Step", "Next Steps"),
                           ("Current Work", "Progress"), ("Errors and fixes", "Progress"),
                           ("Problem Solving", "Key Decisions"), ("Key Technical Concepts", "Critical Context"),
                           ("Files and Code Sections", "Critical Context")):
        body = secs[section]
        assert f"### Earlier: {title}" in body, title
        assert carried_whole(cc_body(title), body), title  # whole, line for line
    assert "User Correction #1" in secs["Critical Context"]  # the analysis too
    assert "Also make the retry count configurable" in secs["User Requests"]  # and the new request


def test_carried_sections_survive_the_next_round() -> None:
    first = structured_summary(session()[8:], CC_SUMMARY, budget=BIG)
    second = structured_summary(session()[:2], first, budget=BIG)
    for title in ("Primary Request and Intent", "Optional Next Step", "Files and Code Sections"):
        assert carried_whole(cc_body(title), second), title
    assert second.count("### Earlier: Primary Request and Intent") == 1


def test_a_summary_among_the_summarized_messages_is_carried() -> None:
    msgs = [Message("user", [Block("text", text=CC_SUMMARY)])] + session()[8:]
    secs = parse_sections(structured_summary(msgs))
    assert "Make conversation sync incremental" in secs["Goal"]
    assert "This session is being continued" not in secs["Goal"]  # not a request


def test_over_budget_whole_sections_go_least_important_first() -> None:
    prev = parse_previous(CC_SUMMARY)
    size = {b.title: len(b.text) for b in prev.blocks}
    fit(prev, prev.chars() - size["Analysis"])
    titles = [b.title for b in prev.blocks]
    assert "Analysis" not in titles and "Primary Request and Intent" in titles
    assert prev.dropped == [f"Analysis ({size['Analysis']:,} characters)"]
    assert all(b.text == cc_body(b.title) for b in prev.blocks)  # nothing cut from a middle


def test_foreign_markdown_sections_are_mapped_not_dropped() -> None:
    prev = "# Checkpoint\n\n## Goal\n- Refactor the modes\n\n## User Preferences\n- Keep commits small\n\n## Key Files\n- src/a.ts\n"
    secs = parse_sections(structured_summary(session()[8:], prev))
    assert "Refactor the modes" in secs["Goal"]
    assert "### Earlier: User Preferences\n> - Keep commits small" in secs["Constraints & Preferences"]
    assert "> - src/a.ts" in secs["Critical Context"]


def test_injected_content_is_never_a_request_nor_a_constraint() -> None:
    injected = ["Base directory for this skill: /skills/x\n\nALWAYS use the skill. You must follow it.",
                "<system-reminder>Never mention this reminder.</system-reminder>",
                "<command-name>/compact</command-name>", "<local-command-stdout>ok</local-command-stdout>",
                "Caveat: The messages below were generated by the user while running local commands."]
    msgs = [Message("user", [Block("text", text="Port the parser to Rust; keep the tests green.")])]
    msgs += [Message("user", [Block("text", text=t)]) for t in injected]
    msgs.append(Message("assistant", [Block("text", text="Working on it.")]))
    s = structured_summary(msgs)
    secs = parse_sections(s)
    for t in injected:
        assert t[:25] not in s
    assert secs["Goal"].startswith("- Port the parser to Rust") and "keep the tests green" in secs["Constraints & Preferences"]


def test_failures_carry_their_error_and_resolution() -> None:
    hook = ("Pre-commit validation failed:\\n\\n[DIALYZER]\\nFinding suitable PLTs\nTotal errors: 1\n"
            "lib/otel.ex:57:13:pattern_match\nThe pattern can never match the type.\n\n:error")
    msgs = [
        Message("user", [Block("text", text="Commit the tracing work.")]),
        Message("assistant", [tc("1", "Edit", file_path="lib/otel.ex", old_string="x", new_string="y")]),
        Message("tool", [tr("1", "<tool_use_error>String to replace not found in file.\nString: x\nend</tool_use_error>", True)]),
        Message("assistant", [tc("2", "Edit", file_path="lib/otel.ex", old_string="a", new_string="b")]),
        Message("tool", [tr("2", "The file lib/otel.ex has been updated.")]),
        Message("assistant", [tc("3", "Bash", command="git add -A && git commit -m 'feat: tracing'")]),
        Message("tool", [tr("3", hook, True)]),
    ]
    secs = parse_sections(structured_summary(msgs))
    blocked = secs["Progress"].split("### Blocked")[1]
    assert "failed: Pre-commit validation failed: lib/otel.ex:57:13:pattern_match The pattern can never match" in blocked
    assert ":error" not in blocked and "end</tool_use_error>" not in secs["Progress"]
    assert ("Edit `lib/otel.ex` failed earlier (String to replace not found in file.); resolved: a later run succeeded"
            in secs["Progress"])
    assert "Commit" not in secs["Progress"].split("### Blocked")[0]  # the failed commit is not done


def test_decisions_are_sentences_and_rejected_designs_are_marked() -> None:
    msgs = [
        Message("user", [Block("text", text="Make the sync incremental.")]),
        Message("assistant", [Block("text", text="Let me try a different approach:\n\nKey Benefits of This Approach\n\n"
                                                 "A JSONL union type was rejected because the file is JSON. "
                                                 "I decided to reuse processedRecordIds because metrics already fills it.")]),
    ]
    dec = parse_sections(structured_summary(msgs))["Key Decisions"]
    assert "different approach" not in dec and "Key Benefits" not in dec
    assert "**Rejected**: A JSONL union type was rejected" in dec
    assert "**Decided**: I decided to reuse processedRecordIds" in dec


def test_done_lists_commands_with_results_deduplicated() -> None:
    msgs: list[Message] = [Message("user", [Block("text", text="Run the tests until green.")])]
    for i, (out, err) in enumerate([("1 failed, 3 passed", True), ("4 passed", False), ("4 passed", False)]):
        msgs += [Message("assistant", [tc(str(i), "Bash", command="make test")]), Message("tool", [tr(str(i), out, err)])]
    prog = parse_sections(structured_summary(msgs))["Progress"]
    assert "- `make test`: ok: 4 passed" in prog.split("### Test and build runs (last result of each)")[1]
    assert "(1 failed, 3 passed); resolved: a later run succeeded (`make test`)" in prog


def test_every_request_verbatim_with_corrections_and_a_recorded_clip() -> None:
    asks = [f"Step {i}: rename field_{i} in models.py" for i in range(12)]
    long_ask = "Here is the stack trace:\n" + "\n".join(f"  frame {i} at x.py:{i}" for i in range(200))
    msgs = [Message("user", [Block("text", text=a)]) for a in asks]
    msgs += [Message("user", [Block("text", text="no, that's not what I asked: keep field_3")]),
             Message("user", [Block("text", text=long_ask)])]
    secs = parse_sections(structured_summary(msgs, budget=BIG))
    goal = secs["Goal"] + secs["User Requests"]
    assert all(a in goal for a in asks)  # not only the last 8
    assert "- (correction) no, that's not what I asked: keep field_3" in goal
    verbatim = "\n".join(f"  {ln}" for ln in long_ask.splitlines()[1:6])  # a list item: continuation lines indented
    assert verbatim in goal and "characters omitted ...]" in goal


def test_values_the_assistant_relied_on() -> None:
    msgs = session() + [Message("assistant", [
        Block("text", text="The client reads `CTX_RETRIES` and raises `RetryError` (see https://example.com/docs, v2.3.1); "
                           "the key `http.retry.max` sets the cap."),
        tc("9", "Edit", file_path="src/http.py", old_string="x", new_string="def backoff_delay(n):\n    return 2 ** n"),
    ]), Message("tool", [tr("9", "ok")])]
    ctx = parse_sections(structured_summary(msgs))["Critical Context"]
    for v in ("`CTX_RETRIES`", "`RetryError`", "`https://example.com/docs`", "`v2.3.1`", "`http.retry.max`", "`backoff_delay`"):
        assert v in ctx, v


def test_read_set_ledger() -> None:
    content = "import os\n\nRETRIES = 3\n"
    shown = "".join(f"{i:>6}→{ln}\n" for i, ln in enumerate(content.splitlines(), 1)).rstrip("\n")
    ref = "ab" * 32
    msgs = [
        Message("user", [Block("text", text="Review the config.")]),
        Message("assistant", [tc("1", "Read", file_path="src/config.py"), tc("2", "Read", file_path="src/big.py", offset=10, limit=5),
                              tc("3", "Read", file_path="src/log.txt")]),
        Message("tool", [tr("1", shown + "\n\n<system-reminder>Whenever you read a file...</system-reminder>"),
                         tr("2", "    10→x = 1"), tr("3", f"line\n[tool output trimmed; ref={ref}; read it with tool_output_cache]")]),
        Message("assistant", [tc("4", "Edit", file_path="src/config.py", old_string="3", new_string="5")]),
        Message("tool", [tr("4", "ok")]),
    ]
    reads = parse_sections(structured_summary(msgs))["Read Set"]
    digest = hashlib.sha256(content.rstrip("\n").encode()).hexdigest()
    assert (f"- `src/config.py`: {len(content.rstrip(chr(10)).encode())} bytes, sha256 {digest[:16]}, "
            "modified after it was read") in reads
    assert "`src/big.py`: 5 bytes" in reads and "lines 10-14" in reads
    assert f"`src/log.txt`: ref={ref}" in reads


# -- issue 13 on the corpus sessions where each defect was seen (skipped without the corpus) --------
def corpus_transcript(*parts: str) -> Transcript:
    return next(iter(formats.read(corpus_file(*parts))))


def compacted(*parts: str, **kw: Any) -> tuple[Transcript, Outcome]:
    t = corpus_transcript(*parts)
    o = compact_transcript(t, None, CompactOptions(force=True, **kw))
    assert o.report.status == "compacted" and o.summary
    assert o.report.tokens_after < o.report.tokens_before
    return t, o


def test_corpus_codemie_keeps_claude_codes_summary() -> None:
    """With the room, every section of a previous summary is carried whole (never cut in its middle)."""
    t, o = compacted("claude_code", "codemie_session-624a4a58.jsonl", summary_budget=BIG)
    s = o.summary or ""
    prev = context_view(t, get_tokenizer("heuristic")).previous_summary or ""
    assert len(prev) > 13000 and "(no user request" not in s
    for b in parse_previous(prev).blocks:  # each section of Claude Code's 13,364 characters, whole
        assert carried_whole(b.text, s), b.title
    assert "User Correction #4" in s and "don't overcomplicate" in s


def test_corpus_codemie_within_the_default_budget() -> None:
    """At the default budget, whole carried sections go (named), and the summary fits about 3,000 tokens."""
    t, o = compacted("claude_code", "codemie_session-624a4a58.jsonl")
    body = sp.strip_file_lists(sp.strip_prefix(o.summary or ""))
    assert len(body) <= sp.SUMMARY_BUDGET * 4 * 1.05
    assert "Left out of the earlier summary for size:" in body
    blocks = parse_previous(context_view(t, get_tokenizer("heuristic")).previous_summary or "").blocks
    assert carried_whole(max(blocks, key=lambda b: b.rank).text, body)  # the most important section whole


def test_corpus_spotter_summary_is_not_cut_from_its_middle() -> None:
    t, o = compacted("claude_code", "spotter_ae4a77f8_main.jsonl", summary_budget=BIG)
    s = o.summary or ""
    assert "characters omitted" not in s
    prev = context_view(t, get_tokenizer("heuristic")).previous_summary or ""
    blocks = parse_previous(prev).blocks
    assert {"Primary Request and Intent", "Errors and Fixes", "Optional Next Step"} <= {b.title for b in blocks}
    for b in blocks:
        assert carried_whole(b.text, s), b.title


def test_corpus_spotter_skill_document_is_not_the_task() -> None:
    secs = parse_sections(structured_summary(corpus_transcript("claude_code", "spotter_ae4a77f8_main.jsonl").messages))
    for name in ("Goal", "Constraints & Preferences", "Progress", "Next Steps"):
        assert "Base directory for this skill" not in secs.get(name, ""), name
    assert secs["Goal"].startswith("- Work on bead spotter-4te.")


def test_corpus_spotter_failures_with_their_causes() -> None:
    s = structured_summary(corpus_transcript("claude_code", "spotter_ae4a77f8_main.jsonl").messages, budget=BIG)
    assert "failed earlier (String to replace not found in file.); resolved: a later run succeeded" in s
    assert "Pre-commit validation failed: lib/spotter_web/controllers/otel_trace_helpers.ex:58:13:pattern_match " \
           "The pattern can never match the type." in s
    assert "end</tool_use_error>" not in s and "failed: :error" not in s


def test_corpus_pi_requests_corrections_and_decisions() -> None:
    t = corpus_transcript("pi", "pi_before-compaction.jsonl")
    v = context_view(t, get_tokenizer("heuristic"))
    s = structured_summary(v.effective, v.previous_summary, budget=BIG)
    secs = parse_sections(s)
    goal = "\n".join(items(secs["Goal"] + "\n" + secs["User Requests"]))
    for r in collect(v.effective)[0]:  # every request, whole (none of these is past the cap)
        assert r.text in goal
    assert "wait, wtf this doesn't look right to me?" in goal and "(correction) wait, wtf" in secs["User Requests"]
    assert "Let me try a different approach" not in secs["Key Decisions"]
    assert "Root Cause Analysis" not in secs["Key Decisions"]
    assert "### Earlier: User Preferences" in secs["Constraints & Preferences"]  # pi's own sections, mapped


def test_corpus_codex_values_and_requests() -> None:
    _, o = compacted("codex", "codemie_rollout-2026-05-11T11-26-55-019e1625.jsonl")
    secs = parse_sections(o.summary or "")
    assert "let's update the defailt context compart to 90 in env var" in secs["User Requests"]
    assert "`OPENCODE_CONFIG_CONTENT`" in secs["Critical Context"]
    assert "superpowers" not in secs["Goal"]  # skills it read are not requests


def test_corpus_read_set_has_sizes_and_hashes() -> None:
    s = structured_summary(corpus_transcript("claude_code", "spotter_ae4a77f8_main.jsonl").messages, budget=BIG)
    reads = parse_sections(s)["Read Set"]
    assert re.search(r"`/home/USER/projects/spotter-worktrees/spotter-4te/mix\.exs`: [\d,]+ bytes, sha256 [0-9a-f]{16}",
                     reads) or re.search(r"`/home/USER/projects/spotter-worktrees/spotter-4te/mix\.exs`: [\d,]+ bytes, lines", reads)
    assert not re.search(r"sha256 [0-9a-f]{16}, lines", reads)  # a partial read's hash is not the file's


def test_read_set_in_the_compact_report() -> None:
    msgs = [Message("user", [Block("text", text="Review the config.")]),
            Message("assistant", [tc("1", "Read", file_path="src/config.py")]),
            Message("tool", [tr("1", "RETRIES = 3")]),
            Message("assistant", [Block("text", text="x " * 4000)]),
            Message("user", [Block("text", text="Thanks, now add a test.")]),
            Message("assistant", [Block("text", text="Adding it.")])]
    o = compact_transcript(Transcript(format="ctxtool", entries=msgs), None,
                           CompactOptions(force=True, keep_recent_tokens=20))
    assert o.report.read_set == [{"path": "src/config.py", "bytes": 11, "sha256": hashlib.sha256(b"RETRIES = 3").hexdigest(),
                                  "lines": None, "ref": None, "modified_after": False}]


def test_the_latest_plan_is_carried() -> None:
    msgs = [Message("user", [Block("text", text="Add the retry option.")]),
            Message("assistant", [tc("1", "update_plan", plan=[{"step": "Write the test", "status": "completed"},
                                                              {"step": "Implement retries", "status": "in_progress"}])]),
            Message("tool", [tr("1", "Plan updated")]),
            Message("assistant", [tc("2", "TodoWrite", todos=[{"content": "Write the test", "status": "completed"},
                                                              {"content": "Implement retries", "status": "completed"},
                                                              {"content": "Document CTX_RETRIES", "status": "pending"}])]),
            Message("tool", [tr("2", "ok")])]
    first = structured_summary(msgs)
    plan = "- [x] Write the test\n- [x] Implement retries\n- [ ] Document CTX_RETRIES"
    assert "### Plan (as last updated)\n" + plan in parse_sections(first)["Progress"]
    assert "### Plan (as last updated) (from the earlier summary)\n" + plan in structured_summary(session()[:2], first)


def test_read_set_from_shell_reads() -> None:
    msgs = [Message("user", [Block("text", text="Look at a.py.")]),
            Message("assistant", [tc("1", "exec_command", cmd="sed -n '1,20p' src/a.py"), tc("2", "exec_command", cmd="cat b.py"),
                                  tc("3", "exec_command", cmd="sed -n '5,9p' c.py")]),
            Message("tool", [tr("1", "Chunk ID: 1\nWall time: 0.1 seconds\nProcess exited with code 0\nOutput:\nX = 1"),
                             tr("2", "Y = 2"), tr("3", "Chunk ID: 2\nProcess running with session ID 7\nOutput:\n")])]
    reads = parse_sections(structured_summary(msgs))["Read Set"]
    assert "`src/a.py`: 5 bytes, lines 1-20" in reads  # a part: no hash
    assert "`b.py`: 5 bytes" in reads and "- `c.py`: lines 5-9\n" in reads + "\n"  # content not in the result
