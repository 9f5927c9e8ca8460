"""Extension points of compaction: a layout and a summarizer are each one class plus one
registry line; the CLI's choices come from the registries; the compaction package names no
format (each format records a compaction through its own hook) and stays in small modules."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT
from test_compact import write_chat

from ctxtool.compaction.layouts import LAYOUTS, Cut, CutContext, Layout, register_layout
from ctxtool.compaction.run import compact_file
from ctxtool.compaction.settings import CompactOptions
from ctxtool.summarizers import SUMMARIZERS, SummaryRequest, get_summarizer, register_summarizer


# -- a new layout: one class, one registry line ---------------------------------------------------------
class LastThree(Layout):
    name = "last-three"
    help = "summary + the last 3 messages"

    def cut(self, ctx: CutContext) -> Cut:
        return Cut(next((i for i in range(len(ctx.messages) - 3, 0, -1) if ctx.ok[i]), None))


# -- a new summarizer: one class, one registry line ------------------------------------------------------
class Shouting:
    name = "shouting"
    context_window = 100_000

    def __init__(self, **options: Any) -> None:
        self.options = options

    def settings(self) -> dict[str, Any]:
        return {"kind": self.name}

    def summarize(self, req: SummaryRequest) -> str:
        return f"## Goal\nSUMMARIZED {len(req.messages)} MESSAGES\n"


@pytest.fixture
def registered() -> Iterator[None]:
    register_layout(LastThree)
    register_summarizer("shouting", Shouting)
    yield
    LAYOUTS.unregister("last-three")
    SUMMARIZERS.unregister("shouting")


def test_new_layout_and_summarizer_plug_in(tmp_path: Path, registered: None) -> None:
    assert "last-three" in LAYOUTS.names() and "shouting" in SUMMARIZERS.names()
    src = write_chat(tmp_path / "c.json")
    out = tmp_path / "o.json"
    opts = CompactOptions(force=True, layout="last-three")
    rep = compact_file(src, out, options=opts, summarizer=get_summarizer("shouting"))
    r = rep.records[0]
    assert r.status == "compacted" and r.kept_messages == 3 and rep.summarizer == "shouting"
    msgs = json.loads(out.read_text())
    assert msgs[1]["content"].startswith("[Previous conversation summary]") and "SUMMARIZED" in msgs[1]["content"]
    assert msgs[2:] == json.loads(src.read_text())[-3:]


def test_unknown_layout_and_summarizer_name_the_choices() -> None:
    from ctxtool.errors import CtxtoolError

    with pytest.raises(CtxtoolError, match="choose one of: summary, retain, initial"):
        LAYOUTS.get("nope")
    with pytest.raises(CtxtoolError, match="choose one of: heuristic, openai, anthropic, command"):
        get_summarizer("nope")


def test_cli_choices_come_from_the_registries(registered: None) -> None:
    from typer.testing import CliRunner

    from ctxtool.cli import app

    r = CliRunner().invoke(app, ["compact", "--help"], terminal_width=400)
    assert r.exit_code == 0, r.output
    assert "<summary|retain|initial|last-three>" in r.stdout
    assert "<heuristic|openai|anthropic|command|shouting>" in r.stdout


# -- structure ----------------------------------------------------------------------------------------------
PACKAGE = ROOT / "ctxtool" / "compaction"
FORMAT_NAMES = ("claude-code", "claude_code", "sharegpt", "codex", "openai", "anthropic", "canonical")


@pytest.mark.parametrize("path", sorted(PACKAGE.glob("*.py")), ids=lambda p: p.name)
def test_compaction_names_no_format_and_stays_small(path: Path) -> None:
    text = path.read_text()
    assert len(text.splitlines()) < 500
    code = re.sub(r'""".*?"""', "", text, flags=re.S)  # docstrings may name the formats they describe
    code = re.sub(r"#.*", "", code)
    for name in FORMAT_NAMES:
        assert f'"{name}"' not in code, f"{path.name} names the format {name}"
    for banned in ('"pi"', "pi_refs", "SESSION_FORMATS", "replacement_history", "fmt ==", '"event_msg"', '"progress"'):
        assert banned not in code, f"{path.name}: {banned}"


def test_every_format_records_a_compaction_its_own_way() -> None:
    from ctxtool import formats
    from ctxtool.formats.base import CompactionNote
    from ctxtool.model import Block, Compaction, Message, Transcript

    kept = Message("user", [Block("text", text="next")], id="m9")
    summary = Message("user", [Block("text", text="[Previous conversation summary]\n\nS")])
    kinds = {}
    for name in formats.FORMAT_NAMES:
        t = Transcript(name)
        note = CompactionNote(text="S", prefixed="[Previous conversation summary]\n\nS", messages=[summary], first_kept=kept)
        entries = formats.get_format(name).record_compaction(t, note)
        kinds[name] = [type(e).__name__ for e in entries]
        for e in entries:
            if isinstance(e, Compaction):
                assert e.first_kept_id == "m9" and e.summary.endswith("S")
                assert formats.get_format(name).read_compaction(t, e)[0].endswith("S")
    expected = {
        "ctxtool": ["Compaction"], "pi": ["Compaction"], "claude-code": ["Compaction"], "codex": ["Compaction"],
        "openai": ["Message"], "anthropic": ["Message"], "sharegpt": ["Message", "Message"],  # + the assistant's ack
        "cline": ["Message"],
        "responses": ["Message"], "inspect": ["Message"], "atif": ["Message"], "gemini": ["Message"],
        "swe-agent": ["Message"], "mini-swe-agent": ["Message"], "openhands": ["Message"],
    }
    assert {k: v for k, v in kinds.items() if k in expected} == expected  # formats added later: their own tests
