"""The heuristic summarizer: seed 003's structured summary, built from the transcript itself."""

from __future__ import annotations

import json
from typing import Any

from ctxtool import summary_prompt as sp
from ctxtool.model import Block, Message
from ctxtool.summarizers import get_summarizer
from ctxtool.summarizers.heuristic import parse_sections, structured_summary

SECTIONS = ["Goal", "Constraints & Preferences", "Progress", "Key Decisions", "Next Steps", "Critical Context", "Read Set"]


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
    assert list(secs) == SECTIONS
    assert "Add retry support to the HTTP client in src/http.py" in secs["Goal"]
    assert "Also make the retry count configurable" in secs["Goal"]  # later requests, in order
    assert '"Do not add new dependencies."' in secs["Constraints & Preferences"]
    assert "prefer an env var" in secs["Constraints & Preferences"]
    prog = secs["Progress"]
    assert "### Done" in prog and "### In Progress" in prog and "### Blocked" in prog
    assert "[x] Edit: `src/http.py`" in prog
    # unresolved, with the line that says why (not the output's last line)
    assert "`pytest -q tests/test_http.py` failed: E AssertionError: retries=3 expected" in prog
    assert "src/config.py" not in prog.split("### In Progress")[0]  # the pending call is not done
    assert "- [ ] Also make the retry count configurable" in prog
    assert "exponential backoff" in secs["Key Decisions"]
    assert "pending tool call Write" in secs["Next Steps"]
    assert "Next, I'll add CTX_RETRIES" in secs["Next Steps"] or "CTX_RETRIES" in secs["Critical Context"]
    assert "Last assistant statement" in secs["Critical Context"]


def test_resolved_failure_is_not_blocked() -> None:
    msgs = session()[:7] + [
        Message("assistant", [tc("5", "Bash", command="pytest -q tests/test_http.py")]),
        Message("tool", [tr("5", "3 passed")]),
    ]
    secs = parse_sections(structured_summary(msgs))
    assert "(none)" in secs["Progress"].split("### Blocked")[1]
    assert "later succeeded" in secs["Critical Context"]


def test_deterministic() -> None:
    assert structured_summary(session()) == structured_summary(session())


def test_incremental_merges_previous_sections() -> None:
    first = structured_summary(session()[:8])
    second = structured_summary(session()[8:], first)
    secs = parse_sections(second)
    assert "Add retry support" in secs["Goal"]  # the earlier goal is preserved
    assert "Do not add new dependencies" in secs["Constraints & Preferences"]
    assert "Edit: `src/http.py`" in secs["Progress"]  # earlier progress carried over
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
    assert secs["Goal"].startswith("Rename foo to bar")
    # injected content is never a request nor a constraint (standing rules are kept with --pin)
    assert "ALWAYS run the linter" not in secs["Constraints & Preferences"]


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
