"""The command summarizer: a program reads the prompt on stdin and prints the summary."""

from __future__ import annotations

import json
import shlex
import sys
import time

import pytest

from ctxtool.errors import CtxtoolError, Failure
from ctxtool.summarizers import SummaryRequest, get_summarizer
from ctxtool.summarizers.command import CommandSummarizer

PY = sys.executable
REQ = SummaryRequest(
    system="SYSTEM PROMPT", prompt="the prompt\nwith two lines", max_tokens=700, style="retain"
)


def cmd(code: str, **kw: object) -> CommandSummarizer:
    s = get_summarizer("command", command=[PY, "-c", code], **kw)
    assert isinstance(s, CommandSummarizer)
    return s


def test_stdin_is_system_and_prompt_and_stdout_is_the_summary() -> None:
    s = cmd(
        "import sys, json, os; d = sys.stdin.read(); "
        "print(json.dumps({'stdin': d, 'max': os.environ['CTXTOOL_SUMMARY_MAX_TOKENS'], "
        "'style': os.environ['CTXTOOL_SUMMARY_STYLE'], 'model': os.environ.get('CTXTOOL_SUMMARY_MODEL')}))",
        model="local-model",
        max_tokens=500,
    )
    out = json.loads(s.summarize(REQ))
    assert out == {
        "stdin": "SYSTEM PROMPT\n\nthe prompt\nwith two lines",
        "max": "500",
        "style": "retain",
        "model": "local-model",
    }


def test_string_command_is_split_without_a_shell() -> None:
    line = f"{shlex.quote(PY)} -c 'import sys; print(sys.argv[1:])' '$HOME' ';' '|' 'a b'"
    s = get_summarizer("command", command=line)
    assert s.summarize(REQ) == "['$HOME', ';', '|', 'a b']"
    assert s.settings() == {
        "kind": "command",
        "argv": [PY, "-c", "import sys; print(sys.argv[1:])", "$HOME", ";", "|", "a b"],
        "model": None,
        "max_tokens": 4096,
    }


def test_unicode_round_trip() -> None:
    s = cmd("import sys; sys.stdout.buffer.write(sys.stdin.buffer.read()[::-1][:0] + 'résumé ✓'.encode())")
    assert s.summarize(SummaryRequest(system="", prompt="naïve 日本語")) == "résumé ✓"


def test_non_zero_exit_reports_the_first_stderr_line() -> None:
    s = cmd(
        "import sys; sys.stdin.read(); sys.stderr.write('\\nmodel not loaded\\nmore detail\\n'); sys.exit(3)"
    )
    with pytest.raises(CtxtoolError) as e:
        s.summarize(REQ)
    assert e.value.kind == Failure.REMOTE
    assert "exited with status 3: model not loaded" in str(e.value)
    assert "more detail" not in str(e.value)


def test_timeout() -> None:
    s = cmd("import time; time.sleep(10)", timeout=0.5)
    t0 = time.monotonic()
    with pytest.raises(CtxtoolError) as e:
        s.summarize(REQ)
    assert time.monotonic() - t0 < 5
    assert e.value.kind == Failure.REMOTE and "timed out after 0.5 s" in str(e.value)


def test_program_not_found() -> None:
    s = get_summarizer("command", command="/nonexistent/summarize-me --fast")
    with pytest.raises(CtxtoolError) as e:
        s.summarize(REQ)
    assert e.value.kind == Failure.REMOTE and "/nonexistent/summarize-me" in str(e.value)


def test_empty_output_is_an_error() -> None:
    s = cmd("import sys; sys.stdin.read(); print('   ')")
    with pytest.raises(CtxtoolError) as e:
        s.summarize(REQ)
    assert e.value.kind == Failure.REMOTE and "no summary" in str(e.value)


@pytest.mark.parametrize("command", [None, "", [], "'unterminated"])
def test_missing_or_bad_command_is_a_usage_error(command: object) -> None:
    with pytest.raises(CtxtoolError) as e:
        get_summarizer("command", command=command)
    assert e.value.kind == Failure.USAGE


def test_context_window() -> None:
    assert cmd("print(1)").context_window == 128000
    assert cmd("print(1)", context_window=9000).context_window == 9000
    assert cmd("print(1)", model="gpt-4").context_window == 8192


def test_ignores_remote_options() -> None:
    s = cmd(
        "print('ok')", base_url="http://127.0.0.1:1", api_key="sk-secret-xyz", retries=9, backoff_base=0.1
    )
    assert s.summarize(REQ) == "ok"
    assert "sk-secret-xyz" not in json.dumps(s.settings())


def test_a_lone_surrogate_in_the_prompt_is_sent_as_a_question_mark() -> None:
    """A transcript's "\\udc80" escape reaches the prompt as a lone surrogate: not UTF-8."""
    s = cmd("import sys; print(sys.stdin.buffer.read().decode('utf-8'))")
    req = SummaryRequest(system="", prompt="bad \udc80 byte")
    assert s.summarize(req) == "bad ? byte"


def test_a_nul_byte_in_the_command_is_a_usage_error() -> None:
    with pytest.raises(CtxtoolError) as e:
        CommandSummarizer([PY, "-c", "print(1)\0"]).summarize(REQ)
    assert e.value.kind == Failure.USAGE and "cannot run summarizer command" in str(e.value)
