"""The one context resolver (ctxtool.tokens.context): window order and sources, strict model
names, the current context after a compaction boundary."""

from __future__ import annotations

import pytest

from ctxtool.cli.exits import ExitCode
from ctxtool.config import Config
from ctxtool.errors import CtxtoolError, Failure
from ctxtool.model import Block, Compaction, Line, Message, Metadata, Record, Transcript, Usage
from ctxtool.tokens import context
from ctxtool.tokens.context import ContextSettings, resolve, resolve_window


def _say(role: str, chars: int, **kw) -> Message:  # type: ignore[no-untyped-def]
    return Message(role, [Block("text", text="x" * chars)], **kw)


def _reply(chars: int, total: int | None = None, model: str | None = None, key: str | None = None) -> Message:
    m = _say("assistant", chars, model=model)
    if total is not None:
        m.usage = Usage(input=total - 10, output=10)
        m.usage_key = key
    return m


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)  # no ctxtool.toml of the project's
    for k in ("CTXTOOL_CONTEXT_WINDOW", "CTXTOOL_COMPACTION_CONTEXT_WINDOW", "CTXTOOL_MODEL"):
        monkeypatch.delenv(k, raising=False)


def test_window_order_and_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    codex = Transcript("codex", entries=[_reply(40, model="gpt-5-codex")], extra={"context_window": 258_400})
    claude = Transcript("claude-code", entries=[_reply(40, model="claude-3-5-haiku-20241022"),
                                                _reply(40, model="claude-sonnet-4-5-20250929")])
    bare = Transcript("openai", entries=[_say("user", 40)])
    # flags first: --context-window, then --model
    assert resolve_window(codex, ContextSettings(window=1234)).source == "flag"
    w = resolve_window(codex, ContextSettings(model="gpt-4o"))
    assert (w.window, w.source, w.model, w.model_source) == (128_000, "registry:gpt-4o", "gpt-4o", "flag")
    # the transcript's record, then the registry entry of its LAST model
    assert (resolve_window(codex).window, resolve_window(codex).source) == (258_400, "transcript")
    w = resolve_window(claude)
    assert (w.window, w.source, w.model, w.model_source) == (
        200_000, "registry:claude-sonnet-4-5", "claude-sonnet-4-5-20250929", "transcript")
    assert resolve_window(bare).window is None and resolve_window(bare).source == "none"
    # the config comes before the transcript (seed 003: compaction.context_window, then context_window)
    monkeypatch.setenv("CTXTOOL_CONTEXT_WINDOW", "9999")
    assert resolve_window(codex, ContextSettings.from_config(Config())).window == 9999
    monkeypatch.setenv("CTXTOOL_COMPACTION_CONTEXT_WINDOW", "7777")
    w = resolve_window(codex, ContextSettings.from_config(Config()))
    assert (w.window, w.source) == (7777, "env:CTXTOOL_COMPACTION_CONTEXT_WINDOW")
    monkeypatch.delenv("CTXTOOL_CONTEXT_WINDOW")
    monkeypatch.delenv("CTXTOOL_COMPACTION_CONTEXT_WINDOW")
    # the config's model fills in for a transcript that names none
    monkeypatch.setenv("CTXTOOL_MODEL", "gpt-4.1")
    cs = ContextSettings.from_config(Config())
    assert resolve_window(bare, cs).source == "registry:gpt-4.1"
    assert resolve_window(claude, cs).source == "registry:claude-sonnet-4-5"
    # flags given through a Config count as flags
    cs = ContextSettings.from_config(Config({"compaction.context_window": 5000, "model": "o3"}))
    assert (cs.window, cs.model) == (5000, "o3")


def test_recorded_unknown_model_leaves_the_window_unknown() -> None:
    t = Transcript("claude-code", entries=[_reply(40, model="claude-opus-9-20300101"), _reply(4, model="<synthetic>")])
    info = resolve(t, settings=ContextSettings())
    assert info.window is None and info.window_source == "none" and info.percent is None
    assert info.model == "claude-opus-9-20300101"  # reported, not an error; <synthetic> is no model


@pytest.mark.parametrize("name", ["gpt-4-o", "gpt-4oo", "claude-3-7-sonnet-2025"])
def test_user_given_model_names_are_strict(name: str) -> None:
    with pytest.raises(CtxtoolError) as e:
        ContextSettings(model=name)
    assert e.value.kind == Failure.USAGE and "did you mean" in str(e.value)


def test_cli_rejects_an_unknown_model_with_suggestions() -> None:
    from conftest import SAMPLES
    from typer.testing import CliRunner

    from ctxtool.cli import app

    for cmd in ("check", "replay", "stats"):
        r = CliRunner().invoke(app, [cmd, str(SAMPLES / "openai_chat.json"), "-m", "gpt-4-o"])
        assert r.exit_code == ExitCode.USAGE, (cmd, r.output)
        assert "gpt-4o" in r.output and "Traceback" not in r.output


# -- the current context after a boundary ----------------------------------------------------


def test_claude_code_boundary_discards_earlier_usage() -> None:
    before = [_say("user", 40_000), _reply(400, total=150_000, key="a")]
    boundary = Record(Line({"type": "system", "subtype": "compact_boundary"}), kind="system:compact_boundary")
    summary = _say("user", 4000, metadata=Metadata(kind="compaction_summary"))
    t = Transcript("claude-code", entries=[*before, boundary, summary, _say("user", 400)])
    info = resolve(t, settings=ContextSettings())
    assert info.tokens_source == "estimate" and info.tokens == 1000 + 100 and info.boundary == "summary"
    # usage recorded after the boundary is trusted
    t.entries += [_reply(40, total=2_000, key="b"), _say("user", 400)]
    info = resolve(t, settings=ContextSettings())
    assert info.tokens_source == "usage" and info.tokens == 2_000 + 100


def test_a_claude_code_boundary_not_yet_followed_by_its_summary() -> None:
    """A session cut right after its compact_boundary line (as one still being written is):
    the context starts after the boundary, with nothing in it yet but the system prompt; the
    usage before it is not trusted (this was an AttributeError, exit 1 from `stats`)."""
    before = [_say("system", 400), _say("user", 40_000), _reply(400, total=150_000, key="a")]
    boundary = Record(Line({"type": "system", "subtype": "compact_boundary"}), kind="system:compact_boundary")
    info = resolve(Transcript("claude-code", entries=[*before, boundary]), settings=ContextSettings())
    assert info.boundary == "boundary" and info.tokens_source == "estimate" and info.tokens == 100
    # a message after it: counted, and usage recorded after the boundary is trusted
    after = [_say("user", 400), _reply(40, total=2_000, key="b")]
    info = resolve(Transcript("claude-code", entries=[*before, boundary, *after]), settings=ContextSettings())
    assert info.tokens_source == "usage" and info.tokens == 2_000

def test_pi_compaction_keeps_its_kept_messages_but_not_their_usage() -> None:
    kept = _say("user", 800, id="k1")
    msgs = [_say("system", 40), _say("user", 40_000), _reply(400, total=90_000, key="a"), kept,
            _reply(400, total=100_000, key="b")]
    c = Compaction("s" * 400, first_kept_id="k1")
    t = Transcript("pi", entries=[*msgs, c, _say("user", 40)])
    info = resolve(t, settings=ContextSettings())
    # system + summary + kept messages + what follows, estimated
    assert info.tokens_source == "estimate" and info.tokens == 10 + 100 + 200 + 100 + 10
    assert info.messages == 4 and info.boundary == "compaction"
    assert info.estimator == "heuristic count of the context (no usage recorded since the last compaction)"


def test_codex_compacted_item_without_kept_messages() -> None:
    t = Transcript("codex", entries=[_say("user", 40_000), _reply(40, total=80_000), Compaction("s" * 4000),
                                     _say("user", 40), _reply(40, total=1_500), _say("user", 40)])
    info = resolve(t, settings=ContextSettings())
    assert info.tokens_source == "usage" and info.tokens == 1_500 + 10


def test_ctxtool_summary_keeps_messages_estimated() -> None:
    """A summary ctxtool wrote names its first kept message: the usage of the messages kept
    after it predates the compaction."""
    summary = _say("user", 400, metadata=Metadata(kind="compaction_summary", extra={"first_kept_id": "k"}))
    t = Transcript("claude-code", entries=[summary, _say("user", 400, id="k"), _reply(400, total=120_000)])
    info = resolve(t, settings=ContextSettings())
    assert info.tokens_source == "estimate" and info.tokens == 300
    # in a dataset, the summary is a user message with ctxtool's prefix
    text = context.SUMMARY_PREFIX + "\n" + "y" * 360
    t = Transcript("openai", entries=[_say("system", 40), _say("user", 4000), Message("user", [Block("text", text=text)]),
                                      _say("user", 40)])
    assert resolve(t, settings=ContextSettings()).tokens == 10 + -(-len(text) // 4) + 10  # the 4,000 chars are gone


def test_message_lists_too() -> None:
    msgs = [_say("user", 40_000), _reply(40, total=50_000),
            _say("user", 400, metadata=Metadata(kind="compaction_summary")), _reply(40, total=700)]
    assert resolve(msgs, settings=ContextSettings(window=1000)).tokens == 700


def test_stats_on_a_session_cut_after_its_boundary_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Through the CLI: the Claude Code sample with a compact_boundary line appended (its
    fields as Claude Code 2.1 writes them), as a session still being written is read."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    sample = Path(__file__).resolve().parent.parent / "samples" / "claude_code_session.jsonl"
    last = json.loads(sample.read_text().splitlines()[-1])
    boundary = {"parentUuid": None, "logicalParentUuid": last["uuid"], "isSidechain": False, "userType": "external",
                "cwd": last["cwd"], "sessionId": last["sessionId"], "version": "2.1.39", "type": "system",
                "subtype": "compact_boundary", "content": "Conversation compacted", "isMeta": False,
                "timestamp": "2026-02-12T14:48:36.922Z", "uuid": "434dc859-6299-4713-8613-d28662692f06",
                "level": "info", "compactMetadata": {"trigger": "manual", "preTokens": 4187}}
    cut = tmp_path / "session.jsonl"
    cut.write_text(sample.read_text() + json.dumps(boundary) + "\n")
    run = subprocess.run([sys.executable, "-m", "ctxtool", "stats", str(cut), "--json"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    (t,) = json.loads(run.stdout)["transcripts"]
    assert t["context"]["tokens"] == 0 and t["context"]["source"] == "estimate"  # nothing after the boundary yet
