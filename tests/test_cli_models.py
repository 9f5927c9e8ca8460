"""`ctxtool models`: the registry's table shows the aliases each entry answers to."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from ctxtool.cli import app
from ctxtool.tokens import models as registry


def test_models_table_and_json_show_aliases() -> None:
    r = CliRunner().invoke(app, ["models"], env={"COLUMNS": "250"})
    assert r.exit_code == 0, r.output
    row = next(line for line in r.stdout.splitlines() if "│ claude-3-7-sonnet " in line)
    assert "claude-3-7-sonnet-20250219, claude-3-7-sonnet-latest" in row
    j = CliRunner().invoke(app, ["models", "--json"])
    entry = next(m for m in json.loads(j.stdout)["models"] if m["name"] == "claude-3-7-sonnet")
    assert entry["aliases"] == list(registry.models()["claude-3-7-sonnet"].aliases)


# -- the maintained source: litellm's table, vendored ---------------------------------------


def test_models_people_use_today_come_from_litellm() -> None:
    """Current models resolve with litellm's window and prices; the vendored file names its
    version, licence and refresh command."""
    src = registry.litellm_source()
    assert src["from"].startswith("litellm ") and src["licence"].startswith("MIT") and src["refresh"] == "make models"
    for name in ("claude-opus-4-7", "gpt-5.5", "gpt-5.3-codex"):
        info = registry.lookup(name)
        assert info is not None and info.source == "litellm", name
        assert info.context_window > 100_000 and info.input_price > 0 and info.output_price > info.input_price
    assert registry.lookup("anthropic/claude-opus-4-7") == registry.lookup("claude-opus-4-7")
    # a dated snapshot ctxtool lists as an alias stays an alias (litellm lists it apart too)
    dated = registry.lookup("claude-opus-4-5-20251101")
    assert dated is not None and dated.name == "claude-opus-4-5"
    # ctxtool's own entries: models litellm no longer lists
    old = registry.lookup("claude-3-7-sonnet")
    assert old is not None and old.source == "ctxtool"


def test_user_file_overrides_and_names_its_source(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "models.json"
    f.write_text(json.dumps({"models": {"gpt-5.5": {"context_window": 123456},
                                        "my-local-model": {"context_window": 32768, "input_price": 0, "output_price": 0},
                                        "claude-opus-4-7": {"aliases": ["opus-latest"]}}}))
    monkeypatch.setenv("CTXTOOL_MODELS", str(f))
    g = registry.lookup("gpt-5.5")
    assert g is not None and g.context_window == 123456 and g.source == "user" and g.input_price > 0
    m = registry.lookup("my-local-model")
    assert m is not None and m.source == "user"
    o = registry.lookup("opus-latest")  # an alias added: the window and prices stay litellm's
    assert o is not None and o.name == "claude-opus-4-7" and o.source == "litellm"


def test_reduce_keeps_chat_models_per_million() -> None:
    from ctxtool.tokens.models_source import reduce

    raw = {
        "sample_spec": {"mode": "chat"},
        "m-chat": {"mode": "chat", "litellm_provider": "openai", "max_input_tokens": 1000, "max_output_tokens": 10,
                   "input_cost_per_token": 1.5e-06, "output_cost_per_token": 6e-06, "cache_read_input_token_cost": 1.5e-07},
        "m-embed": {"mode": "embedding", "max_input_tokens": 8191, "input_cost_per_token": 1e-07, "output_cost_per_token": 0},
        "m-noprice": {"mode": "chat", "max_input_tokens": 1000},
        "gemini/g-1": {"mode": "chat", "litellm_provider": "gemini", "max_input_tokens": 2000, "input_cost_per_token": 1e-06,
                       "output_cost_per_token": 2e-06},
        "azure/m-chat": {"mode": "chat", "max_input_tokens": 5, "input_cost_per_token": 9, "output_cost_per_token": 9},
    }
    out = reduce(raw, {"from": "test"})
    assert out["_source"] == {"from": "test"}
    assert out["models"] == {
        "g-1": {"provider": "gemini", "context_window": 2000, "max_output": 0, "input_price": 1.0, "output_price": 2.0},
        "m-chat": {"provider": "openai", "context_window": 1000, "max_output": 10, "input_price": 1.5, "output_price": 6.0,
                   "cache_read_price": 0.15},
    }


def test_unknown_model_is_named_with_how_to_add_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A model a transcript records that the registry does not know: check, stats and replay
    name it in a warning saying which file to add it to; compact --dry-run --json reports the
    window it decided with and where it came from."""
    import subprocess
    import sys

    from conftest import SAMPLES

    src = SAMPLES / "claude_code_session.jsonl"
    lines = [json.loads(x) for x in src.read_text("utf-8").splitlines() if x.strip()]
    for o in lines:
        if isinstance(o.get("message"), dict) and "model" in o["message"]:
            o["message"]["model"] = "claude-imaginary-9"
    f = tmp_path / "s.jsonl"
    f.write_text("".join(json.dumps(o) + "\n" for o in lines))
    env = {"CTXTOOL_MODELS": str(tmp_path / "models.json"), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    for args in (["check", str(f)], ["stats", str(f)], ["replay", str(f), "--no-chart", "--no-table"]):
        r = subprocess.run([sys.executable, "-m", "ctxtool", *args], capture_output=True, text=True, env=env, check=False)
        assert r.returncode in (0, 5), (args, r.stderr)
        warn = [ln for ln in r.stderr.splitlines() if "claude-imaginary-9" in ln]
        assert len(warn) == 1 and str(tmp_path / "models.json") in warn[0] and "context_window" in warn[0], (args, r.stderr)
    r = subprocess.run([sys.executable, "-m", "ctxtool", "compact", str(f), "--dry-run", "--json"], capture_output=True,
                       text=True, env=env, check=False)
    (rec,) = json.loads(r.stdout)["transcripts"]
    assert (rec["context_window"], rec["window_source"]) == (None, "none")
    # once added to the user's file, the window is the file's
    (tmp_path / "models.json").write_text(json.dumps({"models": {"claude-imaginary-9": {"context_window": 150000}}}))
    r = subprocess.run([sys.executable, "-m", "ctxtool", "compact", str(f), "--dry-run", "--json"], capture_output=True,
                       text=True, env=env, check=False)
    (rec,) = json.loads(r.stdout)["transcripts"]
    assert (rec["context_window"], rec["window_source"]) == (150000, "registry:claude-imaginary-9")
    r = subprocess.run([sys.executable, "-m", "ctxtool", "check", str(f)], capture_output=True, text=True, env=env,
                       check=False)
    assert "claude-imaginary-9" not in r.stderr


def test_compact_dry_run_reports_its_window() -> None:
    from conftest import SAMPLES

    r = CliRunner().invoke(app, ["compact", str(SAMPLES / "claude_code_session.jsonl"), "--dry-run", "--json"])
    (rec,) = json.loads(r.stdout)["transcripts"]
    info = registry.lookup("claude-opus-4-6")
    assert info is not None and info.context_window == 1_000_000  # litellm's; Claude Code runs it with 200,000 without [1m]
    assert (rec["context_window"], rec["window_source"]) == (200_000, "claude-code:no [1m] suffix")
    r = CliRunner().invoke(app, ["compact", str(SAMPLES / "claude_code_session.jsonl"), "--dry-run", "--json",
                                 "--context-window", "50000"])
    (rec,) = json.loads(r.stdout)["transcripts"]
    assert (rec["context_window"], rec["window_source"]) == (50000, "flag")
