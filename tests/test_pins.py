"""compact --pin: pinned instructions kept verbatim beside the summary in every format that
records a compaction, pinned again at the next compaction, checked present afterwards."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from conftest import corpus_file
from test_compact import write_chat, write_dataset
from typer.testing import CliRunner

from ctxtool import compaction as cp
from ctxtool import formats
from ctxtool.cli import app
from ctxtool.cli.exits import ExitCode
from ctxtool.compaction import pins
from ctxtool.compaction.core import compact_transcript
from ctxtool.compaction.report import CompactReport
from ctxtool.compaction.run import compact_file
from ctxtool.compaction.settings import CompactOptions
from ctxtool.compaction.view import context_view
from ctxtool.errors import CtxtoolError, Failure
from ctxtool.formats.base import CompactionNote
from ctxtool.formats.openai import OpenAIFormat
from ctxtool.io.jsonl import Source
from ctxtool.model import PINNED_PREFIX as PIN_PREFIX
from ctxtool.model import Compaction, Message, Transcript
from ctxtool.summarizers.heuristic import structured_summary
from ctxtool.summarizers.heuristic.text import parse_sections
from ctxtool.tokens.count import get_tokenizer

RULES = "ALWAYS run make lint before committing.\nNEVER edit generated files."
SHORT = "Answer in English."


def compact(src: Path, out: Path, fmt: str | None = None, **kw: object) -> CompactReport:
    opts = CompactOptions(**{"force": True, "keep_recent_tokens": 400, **kw})  # type: ignore[arg-type]
    return compact_file(src, out, options=opts, to=fmt)


def read_all(p: Path) -> list[Transcript]:
    return list(formats.read(p))


def source(tmp_path: Path, fmt: str, turns: int = 6) -> Path:
    """A coding session (an OpenAI chat) written in ``fmt``."""
    chat = write_chat(tmp_path / "chat.json", turns=turns)
    if fmt == "openai":
        return chat
    out = tmp_path / f"src.{fmt}.jsonl"
    buf = io.BytesIO()
    formats.write(formats.read(chat), buf, fmt)
    out.write_bytes(buf.getvalue())
    return out


def test_load_texts_files_and_escapes(tmp_path: Path) -> None:
    f = tmp_path / "AGENTS.md"
    f.write_text(RULES + "\n")
    assert pins.load([SHORT, f"@{f}", "@@handle", SHORT]) == [SHORT, RULES, "@handle"]
    with pytest.raises(CtxtoolError) as e:
        pins.load([f"@{tmp_path / 'missing.md'}"])
    assert e.value.kind == Failure.NOT_FOUND and "missing.md" in e.value.message
    with pytest.raises(CtxtoolError) as e:
        pins.load(["  \n"])
    assert e.value.kind == Failure.USAGE


@pytest.mark.parametrize("fmt", ["openai", "claude-code", "codex", "pi", "ctxtool", "anthropic", "sharegpt"])
def test_pins_beside_the_summary_in_each_format(fmt: str, tmp_path: Path) -> None:
    src = source(tmp_path, fmt)
    out = tmp_path / "out.json"
    rep = compact(src, out, pins=[RULES, SHORT])
    assert rep.records[0].status == "compacted"
    (t,) = read_all(out)
    assert pins.missing([RULES, SHORT], t) == []
    assert pins.recorded(t) == [RULES, SHORT]
    view = context_view(t, get_tokenizer("heuristic"))
    summary = view.previous_summary or ""
    assert RULES not in summary.split(PIN_PREFIX)[0]  # outside the summary: its own message or block
    # the pin is not taken for a user request by the next summary
    assert RULES not in parse_sections(structured_summary(view.effective))["Goal"]


@pytest.mark.parametrize("fmt", ["openai", "claude-code", "codex", "pi", "sharegpt"])
def test_pins_survive_the_next_compaction(fmt: str, tmp_path: Path) -> None:
    src = source(tmp_path, fmt, turns=12)
    first, second = tmp_path / "1.json", tmp_path / "2.json"
    compact(src, first, keep_recent_tokens=2500, pins=[RULES])
    rep = compact(first, second)  # no --pin this time
    assert rep.records[0].status == "compacted"
    (t,) = read_all(second)
    assert pins.missing([RULES], t) == [] and pins.recorded(t) == [RULES]
    compact(first, tmp_path / "3.json", pins=[RULES, SHORT])
    (t,) = read_all(tmp_path / "3.json")
    assert pins.recorded(t) == [RULES, SHORT]  # each once


def test_dataset_records_each_get_the_pins(tmp_path: Path) -> None:
    src = write_dataset(tmp_path / "d.jsonl")
    compact(src, tmp_path / "o.jsonl", pins=[SHORT])
    ts = read_all(tmp_path / "o.jsonl")
    assert len(ts) == 3 and all(pins.recorded(t) == [SHORT] and not pins.missing([SHORT], t) for t in ts)


class DropsPins(OpenAIFormat):
    """A format whose compaction hook forgets the pins."""

    name = "drops-pins"

    def sniff(self, sample: list[Any], src: Source) -> int:
        return 0  # never detected: only named

    def record_compaction(self, t: Transcript, note: CompactionNote) -> list[Message | Compaction]:
        return list(note.messages)


def test_a_lost_pin_fails_the_compaction(tmp_path: Path) -> None:
    formats.register(DropsPins())
    try:
        t = formats.read(write_chat(tmp_path / "c.json"), "openai")
        with pytest.raises(CtxtoolError, match="would lose 1 pinned instruction"):
            compact_transcript(next(iter(t)), None, CompactOptions(force=True, keep_recent_tokens=400, pins=[SHORT]),
                                  out_format="drops-pins")
    finally:
        formats.FORMATS.unregister("drops-pins")


def test_output_validation_fails_when_a_pin_does_not_read_back(tmp_path: Path) -> None:
    src = write_chat(tmp_path / "c.json")
    (old,) = read_all(src)
    o = compact_transcript(old, None, CompactOptions(force=True, keep_recent_tokens=400, pins=[SHORT]))
    assert pins.recorded(o.transcript) == [SHORT]
    bad = cp.op.validate_written(str(src), formats.get_format("openai"), [o.transcript], [old])  # written: no pin
    assert "would lose 1 pinned instruction" in bad[0].message


def test_cli_pin_option(tmp_path: Path) -> None:
    rules = tmp_path / "AGENTS.md"
    rules.write_text(RULES)
    src, out = write_chat(tmp_path / "c.json"), tmp_path / "o.json"
    r = CliRunner().invoke(app, ["compact", str(src), "-o", str(out), "--force", "--keep-recent-tokens", "400",
                                 "--pin", f"@{rules}", "--pin", SHORT])
    assert r.exit_code == 0, r.output
    (t,) = read_all(out)
    assert pins.recorded(t) == [RULES, SHORT]
    r = CliRunner().invoke(app, ["compact", str(src), "-o", str(tmp_path / "x.json"), "--force",
                                 "--pin", f"@{tmp_path / 'nope.md'}"])
    assert r.exit_code == ExitCode.NOT_FOUND and "nope.md" in r.output and "Traceback" not in r.output


@pytest.mark.parametrize("parts", [("claude_code", "codemie_session-624a4a58.jsonl"), ("pi", "pi_before-compaction.jsonl"),
                                   ("codex", "codemie_rollout-2026-05-11T11-26-55-019e1625.jsonl")])
def test_corpus_pins_round_trip(parts: tuple[str, str], tmp_path: Path) -> None:
    out = tmp_path / parts[1]
    rep = compact(corpus_file(*parts), out, keep_recent_tokens=20000, pins=[RULES])
    assert rep.records[0].status == "compacted"
    (t,) = read_all(out)
    assert pins.missing([RULES], t) == []
    again = tmp_path / f"again-{parts[1]}"
    compact(out, again, keep_recent_tokens=2000)
    (t2,) = read_all(again)
    assert pins.missing([RULES], t2) == []
