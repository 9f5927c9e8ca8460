"""`ctxtool models`: the registry's table shows the aliases each entry answers to."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from ctxtool import registry
from ctxtool.cli import app


def test_models_table_and_json_show_aliases() -> None:
    r = CliRunner().invoke(app, ["models"], env={"COLUMNS": "250"})
    assert r.exit_code == 0, r.output
    row = next(line for line in r.stdout.splitlines() if "│ claude-3-7-sonnet " in line)
    assert "claude-3-7-sonnet-20250219, claude-3-7-sonnet-latest" in row
    j = CliRunner().invoke(app, ["models", "--json"])
    entry = next(m for m in json.loads(j.stdout)["models"] if m["name"] == "claude-3-7-sonnet")
    assert entry["aliases"] == list(registry.models()["claude-3-7-sonnet"].aliases)
