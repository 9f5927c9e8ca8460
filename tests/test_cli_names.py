"""One name per idea: every command's parameters, read from the app (so commands added
later are held too), against the naming table (ctxtool.cli.names, printed in docs/cli.md):
a flag of the table has its short form wherever it appears, former spellings are never
shown but still work, numbers have their range, choices are listed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ctxtool.cli import app
from ctxtool.cli.exits import ExitCode
from ctxtool.cli.names import BY_LONG, NAMES, RENAMED, naming_table

ROOT = Path(__file__).resolve().parent.parent
S = ROOT / "samples"
runner = CliRunner()


def commands() -> dict[str, object]:
    from ctxtool.cli.docgen import leaves

    return leaves()


def options(cmd) -> list:
    return [p for p in cmd.params if getattr(p, "param_type_name", "") == "option" and not getattr(p, "hidden", False)]


def test_a_flag_of_the_table_has_its_short_form_everywhere():
    wrong = []
    for path, cmd in commands().items():
        for p in options(cmd):
            longs = [o for o in p.opts + p.secondary_opts if o.startswith("--")]
            shorts = [o for o in p.opts + p.secondary_opts if not o.startswith("--")]
            for lo in longs:
                if lo in BY_LONG and BY_LONG[lo].short and BY_LONG[lo].short not in shorts:
                    wrong.append(f"{path} {lo}: missing {BY_LONG[lo].short}")
            short_of = {n.short: n.long for n in NAMES if n.short}
            for sh in shorts:
                if sh in short_of and short_of[sh] not in longs:
                    wrong.append(f"{path} {sh}: means {short_of[sh]} elsewhere, here {longs}")
    assert wrong == []


def test_former_spellings_are_not_shown():
    former = {old for m in RENAMED.values() for old in m if old != "--strategy"}
    shown = [(path, o) for path, cmd in commands().items() for p in options(cmd) for o in p.opts if o in former]
    assert shown == []
    strategy = [path for path, cmd in commands().items() for p in options(cmd) if "--strategy" in p.opts]
    assert strategy == ["window"]  # one meaning: the history window's strategy


def test_every_number_has_its_range():
    """A count, a size or a limit refuses what makes no sense (``--limit -1``)."""
    from typer._click.types import FloatParamType, FloatRange, IntParamType, IntRange

    missing = [f"{path} {p.opts[0]}" for path, cmd in commands().items() for p in options(cmd)
               if isinstance(p.type, (IntParamType, FloatParamType)) and not isinstance(p.type, (IntRange, FloatRange))]
    assert missing == []
    r = runner.invoke(app, ["stats", str(S / "claude_code_session.jsonl"), "--limit", "-1"])
    assert r.exit_code == ExitCode.USAGE


def test_choices_are_listed():
    """An option that takes one of a known set shows the set, not ``<str>``."""
    chosen = ("--format", "--to", "--tokenizer", "--policy", "--preset", "--mode", "--layout", "--summarizer",
              "--strategy", "--tool-summary", "--on-error", "--by", "--fail-on", "--style")
    bare = []
    import typer._click as click

    for path, cmd in commands().items():
        ctx = click.Context(cmd, info_name=path)
        for p in options(cmd):
            if p.opts[0] in chosen and path != "export":
                metavar = p.make_metavar(ctx) if hasattr(p, "make_metavar") else ""
                if "<str>" in metavar or "|" not in metavar:
                    bare.append(f"{path} {p.opts[0]}: {metavar}")
    assert bare == []


def test_former_spellings_still_work(tmp_path):
    session = str(S / "claude_code_session.jsonl")
    new = runner.invoke(app, ["stats", session, "--limit", "1"])
    old = runner.invoke(app, ["stats", session, "--top", "1"])
    assert new.exit_code == old.exit_code == 0 and new.stdout == old.stdout
    assert "largest tool outputs (top 1)" in new.stdout
    for flags in (["--cutoff", "2", "--strategy", "heuristic"], ["--tool-call-cutoff", "2", "--tool-summary", "heuristic"],
                  ["-n", "2", "--tool-summary=heuristic"]):
        r = runner.invoke(app, ["archive", str(S / "codex_rollout.jsonl"), *flags, "--dry-run", "--json"])
        assert r.exit_code == 0, r.output
        d = json.loads(r.stdout)
        assert (d["cutoff"], d["strategy"]) == (2, "heuristic")
    r = runner.invoke(app, ["check", session, "--policy", "seed000", "--context-window", "200000", "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["policy"] == "effective-limit"


def test_compact_takes_cut_s_short_flag():
    r = runner.invoke(app, ["compact", str(S / "claude_code_session.jsonl"), "--force", "-k", "1000", "-n", "3",
                            "--dry-run", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["transcripts"][0]["cut"]["keep_budget"] == 1000


def test_the_naming_table_is_in_the_cli_reference():
    table = naming_table(commands())
    assert table in (ROOT / "docs" / "cli.md").read_text()
    for n in NAMES:
        assert f"| `{n.long}` |" in table


@pytest.mark.parametrize("flag", ["--output", "--format", "--json", "--limit"])
def test_each_name_is_used(flag):
    assert any(flag in p.opts for cmd in commands().values() for p in options(cmd))
