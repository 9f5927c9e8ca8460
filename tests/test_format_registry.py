"""A new format is one module plus one registry line (issue 11): a tiny format defined here,
registered, detected, and round-tripped through ``convert`` like the built-in ones."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ctxtool import formats
from ctxtool.cli import app
from ctxtool.errors import CtxtoolError
from ctxtool.formats.base import ErrorPolicy, Format, placed, template
from ctxtool.io.jsonl import Source
from ctxtool.model import Block, Message, Transcript

runner = CliRunner()
WHO = {"human": "user", "bot": "assistant", "rules": "system"}
ROLE = {v: k for k, v in WHO.items()}


# -- the whole format: one small class ------------------------------------------------
class ChatLog(Format):
    """``{"who": "human"|"bot"|"rules", "say": text}`` lines."""

    name = "chatlog"
    description = "A tiny example: who/say lines"

    def sniff(self, sample: list[Any], src: Source) -> int:
        ok = src.layout == "jsonl" and sample and all(isinstance(o, dict) and o.get("who") in WHO and "say" in o for o in sample)
        return 90 if ok else 0

    def read(self, src: Source, policy: ErrorPolicy) -> Iterator[Transcript]:
        t = Transcript(self.name, path=src.path, lineno=1)
        t.extra["layout"] = "entries_jsonl"
        for ln in src.lines(policy):
            o = ln.obj
            if not (isinstance(o, dict) and o.get("who") in WHO and isinstance(o.get("say"), str)):
                policy.handle(placed(CtxtoolError("not a chatlog line"), src.path, ln.lineno))
                continue
            t.entries.append(Message(WHO[o["who"]], [Block("text", text=o["say"])], lines=[ln]))
        yield t

    def render(self, msg: Message, t: Transcript) -> list[Any]:
        o = template(msg) if "who" in template(msg) else {}
        o["who"] = ROLE.get(msg.role, "human")
        o["say"] = "\n".join(b.text or b.arguments_text() for b in msg.content)
        return [o]


FORMAT = ChatLog()


@pytest.fixture
def chatlog() -> Iterator[None]:
    formats.register(FORMAT)  # the one registry line
    yield
    formats.FORMATS.unregister("chatlog")


def test_registered_format_is_detected_listed_and_round_trips(chatlog: None, tmp_path: Path) -> None:
    src = tmp_path / "log.jsonl"
    lines = [{"who": "rules", "say": "be brief"}, {"who": "human", "say": "hi ✓", "at": 1.50}, {"who": "bot", "say": "hello"}]
    src.write_text("".join(json.dumps(o, ensure_ascii=False) + "\n" for o in lines))
    assert "chatlog" in formats.format_names()
    r = runner.invoke(app, ["formats", "--json"])
    assert r.exit_code == 0 and "chatlog" in r.stdout
    (t,) = formats.read(src)
    assert t.format == "chatlog" and [m.role for m in t.messages] == ["system", "user", "assistant"]
    # to its own format, and through canonical JSONL and back: the same bytes
    same, canon, back = tmp_path / "same.jsonl", tmp_path / "c.jsonl", tmp_path / "back.jsonl"
    assert runner.invoke(app, ["convert", str(src), "--to", "chatlog", "-o", str(same)]).exit_code == 0
    assert same.read_bytes() == src.read_bytes()
    assert runner.invoke(app, ["convert", str(src), "--to", "ctxtool", "-o", str(canon)]).exit_code == 0
    r = runner.invoke(app, ["convert", str(canon), "--to", "chatlog", "-o", str(back)])
    assert r.exit_code == 0, r.output
    assert back.read_bytes() == src.read_bytes()
    # to another format and back: the same conversation
    oai, again = tmp_path / "o.jsonl", tmp_path / "again.jsonl"
    assert runner.invoke(app, ["convert", str(src), "--to", "openai", "-o", str(oai)]).exit_code == 0
    r = runner.invoke(app, ["convert", str(oai), "--to", "chatlog", "-o", str(again)])
    assert r.exit_code == 0, r.output
    assert [(o["who"], o["say"]) for o in map(json.loads, again.read_text().splitlines())] == [
        (o["who"], o["say"]) for o in lines
    ]
    # the CLI's --format takes it; an unknown name lists the registry
    assert runner.invoke(app, ["stats", str(src), "--format", "chatlog"]).exit_code == 0
    r = runner.invoke(app, ["stats", str(src), "--format", "nope"])
    assert r.exit_code == 2 and "chatlog" in r.stderr


def test_unregistered_is_gone() -> None:
    assert "chatlog" not in formats.format_names()
    assert formats.FORMAT_NAMES[:7] == ("ctxtool", "openai", "anthropic", "claude-code", "codex", "pi", "sharegpt")
    assert {"swe-agent", "mini-swe-agent", "openhands", "cline", "responses", "inspect", "inspect-eval", "atif", "gemini"} <= set(formats.FORMAT_NAMES)
