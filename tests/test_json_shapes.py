"""One JSON shape per command: every command's --json is one object (the envelope of
ctxtool/cli/render.py) whatever the number of transcripts, valid against its schema in
schemas/; --jsonl is one line per transcript then a summary line, each valid against the
schema's $defs/line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, SAMPLES, all_transcript_params
from jsonschema import Draft202012Validator
from typer.testing import CliRunner

from ctxtool.cli import app
from ctxtool.cli.exits import ExitCode

SCHEMAS = ROOT / "schemas"
runner = CliRunner()
OK = (0, ExitCode.INVALID, ExitCode.THRESHOLD)  # validate and check report findings by exit status


@cache
def validator(name: str) -> Draft202012Validator:
    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text("utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def line_validator(name: str) -> Draft202012Validator:
    v = validator(name)
    return Draft202012Validator({**v.schema, "$ref": "#/$defs/line", "required": [], "properties": {},
                                 "additionalProperties": True, "type": "object"})


def errors(v: Draft202012Validator, obj: Any) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"[:300] for e in v.iter_errors(obj)][:5]


def run(*args: str, env: dict[str, str] | None = None) -> Any:
    r = runner.invoke(app, [str(a) for a in args], env=env)
    assert r.exit_code in OK, (args, r.output, r.exception)
    return r


def check_json(name: str, command: str, out: str) -> dict[str, Any]:
    d = json.loads(out)
    assert isinstance(d, dict)
    assert (d["command"], d["version"]) == (command, 1)
    assert errors(validator(name), d) == []
    return d


def check_jsonl(name: str, command: str, out: str) -> list[dict[str, Any]]:
    lines = [json.loads(x) for x in out.splitlines()]
    assert lines and lines[-1]["type"] == "summary" and lines[-1]["command"] == command
    assert all(x["type"] == "transcript" for x in lines[:-1])
    v = line_validator(name)
    for x in lines:
        assert errors(v, x) == []
    return lines


def transcript_commands(path: Path, tmp: Path) -> Iterator[tuple[str, list[str]]]:
    """(schema name, argv) of every command that reads transcripts, for one input file."""
    p = str(path)
    yield "stats", ["stats", p]
    yield "validate", ["validate", p]
    yield "convert", ["convert", p, "--to", "ctxtool", "-o", str(tmp / "conv.jsonl")]
    yield "cut", ["cut", p, "-k", "300"]
    yield "check", ["check", p]
    yield "window", ["window", p, "--dry-run", "--max-messages", "6"]
    yield "repair", ["repair", p, "--dry-run"]
    yield "archive", ["archive", p, "-n", "2", "--dry-run", "--strategy", "heuristic"]
    yield "replay", ["replay", p]
    yield "compactions", ["compactions", p]
    yield "compact", ["compact", p, "--dry-run", "--force", "--keep-recent-tokens", "300"]
    yield "truncate", ["truncate", p, "--max-lines", "5", "-o", str(tmp / "trunc" / path.name)]
    yield "trim", ["trim", p, "--budget", "200", "-o", str(tmp / "trim" / path.name)]
    yield "restore", ["restore", str(tmp / "trunc" / path.name), "-o", str(tmp / "rest" / path.name)]


@pytest.mark.parametrize("path", all_transcript_params())
def test_every_transcript_command_has_one_shape(path: Path, tmp_path: Path) -> None:
    env = {"CTXTOOL_CACHE_DIR": str(tmp_path / "cache")}
    for d in ("trunc", "trim", "rest"):
        (tmp_path / d).mkdir()
    for name, argv in transcript_commands(path, tmp_path):
        d = check_json(name, argv[0], run(*argv, "--json", env=env).stdout)
        assert isinstance(d["transcripts"], list) and d["transcripts"], name
        if name not in ("stats", "validate", "replay", "archive"):
            assert d["totals"]["transcripts"] == len(d["transcripts"]), name
    sample = path.parent == SAMPLES
    for name, argv in transcript_commands(path, tmp_path):
        if not sample and name not in ("stats", "cut", "check", "replay"):
            continue  # every command's --jsonl on the samples; the streaming ones on the corpus too
        if name in ("truncate", "trim", "restore", "convert"):
            argv = [a if not a.startswith(str(tmp_path)) else a + ".l" for a in argv]
            if name == "restore":
                argv[1] = str(tmp_path / "trunc" / path.name)
        lines = check_jsonl(name, argv[0], run(*argv, "--jsonl", env=env).stdout)
        assert len(lines) > 1, name


def test_one_record_and_many_records_have_the_same_shape() -> None:
    """A single session and a dataset of several records: the same keys, a list either way."""
    for cmd in (["cut"], ["check"], ["window", "--dry-run"], ["repair", "--dry-run"], ["replay"], ["stats"]):
        one = json.loads(run(cmd[0], SAMPLES / "pi_session.jsonl", *cmd[1:], "--json").stdout)
        many = json.loads(run(cmd[0], SAMPLES / "openai_dataset.jsonl", *cmd[1:], "--json").stdout)
        assert list(one) == list(many), cmd
        assert len(one["transcripts"]) == 1 and len(many["transcripts"]) == 3
        assert set(one["transcripts"][0]) <= set(many["transcripts"][0]) | {"messages_dropped"}


def test_jsonl_lines_are_the_json_items() -> None:
    """A --jsonl line is the --json list's item plus its type; the summary line holds the rest."""
    src = SAMPLES / "openai_dataset.jsonl"
    d = json.loads(run("check", src, "--json").stdout)
    lines = [json.loads(x) for x in run("check", src, "--jsonl").stdout.splitlines()]
    assert [{k: v for k, v in x.items() if k != "type"} for x in lines[:-1]] == d["transcripts"]
    assert {k: v for k, v in lines[-1].items() if k != "type"} == {k: v for k, v in d.items() if k != "transcripts"}


def test_other_commands(tmp_path: Path) -> None:
    env = {"CTXTOOL_CACHE_DIR": str(tmp_path / "cache")}
    run("truncate", SAMPLES / "claude_code_session.jsonl", "--max-lines", "5", "-o", tmp_path / "t.jsonl", env=env)
    ref = json.loads(run("refs", "ls", "--json", env=env).stdout)["refs"][0]["id"]
    for name, argv in (
        ("formats", ["formats"]),
        ("models", ["models"]),
        ("config", ["config"]),
        ("instructions", ["instructions", str(SAMPLES)]),
        ("refs-ls", ["refs", "ls"]),
        ("refs-verify", ["refs", "verify"]),
        ("refs-show", ["refs", "show", ref, "--limit", "3"]),
        ("refs-grep", ["refs", "grep", "e", "--all", "--max-count", "3"]),
        ("refs-gc", ["refs", "gc", str(tmp_path / "t.jsonl")]),
        ("usage", ["usage", str(SAMPLES)]),
    ):
        d = check_json(name, " ".join(argv[: 2 if argv[0] == "refs" else 1]), run(*argv, "--json", env=env).stdout)
        assert d


def test_report_goes_to_stderr_when_stdout_is_the_transcript(tmp_path: Path) -> None:
    r = runner.invoke(app, ["truncate", str(SAMPLES / "openai_dataset.jsonl"), "--json"],
                      env={"CTXTOOL_CACHE_DIR": str(tmp_path)})
    assert r.exit_code == 0
    assert r.stdout.strip() and not r.stdout.startswith('{\n')  # the transcript
    check_json("truncate", "truncate", r.stderr)


def test_convert_json_needs_an_output_file() -> None:
    r = runner.invoke(app, ["convert", str(SAMPLES / "pi_session.jsonl"), "--to", "openai", "--json"])
    assert r.exit_code == ExitCode.USAGE


def test_a_schema_for_every_json_command() -> None:
    """Every command with --json has a schema, and every schema names a command."""
    import typer
    import typer._click as click

    group = typer.main.get_command(app)
    names = []
    with click.Context(group) as ctx:
        for name in group.list_commands(ctx):
            cmd = group.get_command(ctx, name)
            if hasattr(cmd, "list_commands"):
                subs = [(f"{name}-{s}", cmd.get_command(ctx, s)) for s in cmd.list_commands(ctx)]
            else:
                subs = [(name, cmd)]
            names += [n for n, c in subs if any("--json" in getattr(p, "opts", ()) for p in c.params)]
    have = {p.name.removesuffix(".schema.json") for p in SCHEMAS.glob("*.schema.json")} - {"transcript"}
    assert sorted(names) == sorted(have)


def test_jsonl_streams_each_transcript_as_it_comes(tmp_path: Path) -> None:
    """`check --jsonl` on a FIFO: the first transcript's line arrives while the writer still
    holds the pipe open (the input is not read to its end first)."""
    import os
    import select
    import subprocess
    import sys

    fifo = tmp_path / "in.jsonl"
    os.mkfifo(fifo)
    rec = json.dumps({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]})
    proc = subprocess.Popen([sys.executable, "-m", "ctxtool", "check", str(fifo), "--jsonl"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        with open(fifo, "w") as w:
            w.write((rec + "\n") * 70)  # format detection reads up to 64 lines first
            w.flush()
            ready, _, _ = select.select([proc.stdout], [], [], 60)
            assert ready, "no line before the input ended"
            assert proc.stdout is not None
            first = json.loads(proc.stdout.readline())
            w.write((rec + "\n") * 5)
        rest = [json.loads(x) for x in proc.stdout.read().splitlines()]
    finally:
        proc.wait(60)
    assert proc.returncode == 0
    lines = [first, *rest]
    assert [x["type"] for x in lines] == ["transcript"] * 75 + ["summary"]
    assert lines[-1]["totals"] == {"transcripts": 75, "compact": 0}
    for x in lines:
        assert errors(line_validator("check"), x) == []


def test_an_error_before_the_first_transcript_prints_no_json(tmp_path: Path) -> None:
    chat = tmp_path / "chat.jsonl"  # no model: no window known, which --policy ratio refuses
    chat.write_text(json.dumps({"role": "user", "content": "hi"}) + "\n")
    r = runner.invoke(app, ["check", str(chat), "--policy", "ratio", "--json"])
    assert r.exit_code == ExitCode.USAGE
    assert r.stdout == "" and "no context limit" in r.stderr


def test_per_transcript_counts_parallel_equal_serial(tmp_path: Path) -> None:
    """truncate's per-transcript entries (kept only when asked) are the same from the forked
    workers as from one process, and add up to the totals."""
    from ctxtool.tool_outputs import algorithms as toolout
    from ctxtool.tool_outputs import files as tools_ops

    lines = []
    for i in range(30):
        out = "\n".join(f"line {k} of {i}" for k in range(100 + 20 * i))
        msgs = [{"role": "user", "content": f"task {i}"},
                {"role": "assistant", "content": None,
                 "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": "sh", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": f"c{i}", "content": out}]
        lines.append(json.dumps({"id": f"r{i}", "messages": msgs}))
    src = tmp_path / "ds.jsonl"
    src.write_text("\n".join(lines) + "\n")
    lim = toolout.limits_with(toolout.Limits(), max_lines=300)
    assert tools_ops.truncate_file(str(src), None, limits=lim, cache=tmp_path / "c0").items is None
    a = tools_ops.truncate_file(str(src), str(tmp_path / "a.jsonl"), limits=lim, cache=tmp_path / "ca", records=True, jobs=1)
    b = tools_ops.truncate_file(str(src), str(tmp_path / "b.jsonl"), limits=lim, cache=tmp_path / "cb", records=True, jobs=2)
    assert a.items is not None and b.items is not None
    assert [x["id"] for x in a.items] == [f"r{i}" for i in range(30)]
    assert b.items == a.items
    assert sum(x["truncated"] for x in a.items) == a.truncated > 0
    assert sum(x["tokens_after"] for x in a.items) == a.tokens_after
