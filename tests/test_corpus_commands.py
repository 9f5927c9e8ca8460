"""Every sample and corpus file through stats, validate and convert (own format, and via ctxtool)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import all_transcript_params, expected_format, source_items
from typer.testing import CliRunner

from ctxtool import formats
from ctxtool.cli import app
from ctxtool.cli.exits import ExitCode
from ctxtool.history.validate import schema_errors

runner = CliRunner()


def _items(p: Path, hint: str) -> list:  # type: ignore[type-arg]
    raw = p.read_bytes()
    if hint == "json":
        return [json.loads(raw)]
    return [json.loads(x) for x in raw.splitlines() if x.strip()]


@pytest.mark.parametrize("path", all_transcript_params())
def test_stats_validate_convert(path: Path, tmp_path: Path) -> None:
    fmt = expected_format(path)
    r = runner.invoke(app, ["stats", str(path), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["totals"]["messages"] > 0
    assert d["transcripts"][0]["format"] == fmt
    assert sum(v["tokens"] for v in d["by_role"].values()) == d["totals"]["tokens"]

    r = runner.invoke(app, ["validate", str(path), "--json"])
    assert r.exit_code in (0, ExitCode.INVALID), r.output
    v = json.loads(r.stdout)
    assert not [p for p in v["problems"] if p["code"] in ("unreadable", "schema")]

    src_items, hint = source_items(path)
    same = tmp_path / ("same" + path.suffix)
    assert runner.invoke(app, ["convert", str(path), "--to", fmt, "-o", str(same)]).exit_code == 0
    assert _items(same, hint) == src_items

    canon = tmp_path / "canon.jsonl"
    assert runner.invoke(app, ["convert", str(path), "--to", "ctxtool", "-o", str(canon)]).exit_code == 0
    for line in canon.read_text().splitlines():
        assert schema_errors(json.loads(line)) == []
    back = tmp_path / ("back" + path.suffix)
    assert runner.invoke(app, ["convert", str(canon), "--to", fmt, "-o", str(back)]).exit_code == 0
    assert _items(back, hint) == src_items


@pytest.mark.parametrize("path", all_transcript_params())
def test_cross_format_conversions_stay_valid(path: Path, tmp_path: Path) -> None:
    """Converting to every other format yields a file ctxtool reads back, with no new orphans."""
    from ctxtool.history.validate import check_messages

    ts = list(formats.read(str(path)))
    before = sum(len(check_messages(t.messages)) for t in ts)
    for target in ("openai", "anthropic", "ctxtool"):
        out = tmp_path / f"x.{target}.jsonl"
        r = runner.invoke(app, ["convert", str(path), "--to", target, "-o", str(out)])
        assert r.exit_code == 0, r.output
        back = list(formats.read(str(out), target))
        assert sum(len(t.messages) for t in back) > 0
        after = sum(len(check_messages(t.messages)) for t in back)
        assert after <= before, f"{target}: {after} structural problems after conversion, {before} before"
