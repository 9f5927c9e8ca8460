"""Parquet datasets (ctxtool.io.parquet): a file, a Hugging Face layout directory of shards or an
fsspec URL, one transcript per row, its conversation a list of structs or a JSON string,
OpenAI or ShareGPT shaped. Every command that reads or writes datasets works on them, every
other column, the schema, the row order and the row groups are kept, the sharding is kept,
and truncate -> restore gives back equal tables (polars' DataFrame.equals)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_compact import conversation

pl = pytest.importorskip("polars")
pq = pytest.importorskip("pyarrow.parquet")

from ctxtool.errors import CtxtoolError  # noqa: E402
from ctxtool.history.window import WindowOp  # noqa: E402
from ctxtool.run.engines import Sharding, get_engine  # noqa: E402
from ctxtool.run.runner import run_file  # noqa: E402
from ctxtool.tool_outputs import files as tools_ops  # noqa: E402
from ctxtool.tool_outputs.algorithms import Limits  # noqa: E402

TIGHT = ["--max-lines", "5", "--max-bytes", "400"]


def ctxtool(*args: str, cwd: Path, cache: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CTXTOOL_CACHE_DIR": str(cache or cwd / "cache")}
    return subprocess.run([sys.executable, "-m", "ctxtool", *args], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=300)


def frame(n: int, start: int = 0, *, key: str = "messages", as_json: bool = False, sharegpt: bool = False) -> Any:
    """Rows shaped like an agent-trajectory set: an id, typed columns of every kind, the conversation."""
    convs = [conversation(turns=2 + (i % 3), tag=f"t{i}", filler=600 + 40 * i) for i in range(start, start + n)]
    if sharegpt:
        role = {"system": "system", "user": "human", "assistant": "gpt", "tool": "observation"}
        convs = [[{"from": role[m["role"]], "value": m.get("content") or json.dumps(m.get("tool_calls"))} for m in c]
                 for c in convs]
    return pl.DataFrame({
        "instance_id": [f"repo__issue-{i}" for i in range(start, start + n)],
        "model_name": ["agent-1"] * n,
        "target": [i % 2 == 0 for i in range(start, start + n)],
        key: [json.dumps(c) for c in convs] if as_json else convs,
        "exit_status": [None if i % 4 == 0 else "submitted" for i in range(start, start + n)],
        "score": [i / 7 for i in range(start, start + n)],
        "tags": [["a", "b"][: i % 3] for i in range(start, start + n)],
    })


def hf_layout(root: Path, shards: int = 3, rows: int = 6, **kw: Any) -> list[Path]:
    """``root/data/train-0000k-of-0000n.parquet``, each in row groups of 2 rows."""
    (root / "data").mkdir(parents=True, exist_ok=True)
    paths = []
    for k in range(shards):
        p = root / "data" / f"train-{k:05d}-of-{shards:05d}.parquet"
        frame(rows, k * rows, **kw).write_parquet(p, row_group_size=2)
        paths.append(p)
    return paths


def shard_names(d: Path) -> list[str]:
    return sorted(p.relative_to(d).as_posix() for p in d.rglob("*.parquet"))


def test_truncate_restore_a_sharded_set_gives_back_equal_tables(tmp_path: Path) -> None:
    src = tmp_path / "swe"
    paths = hf_layout(src)
    r = ctxtool("truncate", "swe", "-o", "out", *TIGHT, "--cache-dir", "c", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert shard_names(tmp_path / "out") == shard_names(src) == [f"data/train-0000{k}-of-00003.parquet" for k in range(3)]
    for p in paths:
        rel = p.relative_to(src)
        before, after = pl.read_parquet(p), pl.read_parquet(tmp_path / "out" / rel)
        assert not after.equals(before)  # outputs were cut
        assert after.drop("messages").equals(before.drop("messages"))  # every other column, in row order
        assert pq.ParquetFile(tmp_path / "out" / rel).metadata.num_row_groups == pq.ParquetFile(p).metadata.num_row_groups
        lens = [sum(len(m["content"] or "") for m in c) for c in after["messages"].to_list()]
        assert sum(lens) < sum(sum(len(m["content"] or "") for m in c) for c in before["messages"].to_list())
    r = ctxtool("restore", "out", "-o", "back", "--cache-dir", "c", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    for p in paths:
        rel = p.relative_to(src)
        back = pl.read_parquet(tmp_path / "back" / rel)
        assert back.equals(pl.read_parquet(p))
        assert pq.read_schema(tmp_path / "back" / rel) == pq.read_schema(p)
    rep = json.loads((tmp_path / "out" / "_report.json").read_text())
    assert rep["transcripts"] == 18 and [s["name"] for s in rep["shards"]] == shard_names(src)
    # a re-run reuses every finished shard
    again = ctxtool("truncate", "swe", "-o", "out", *TIGHT, "--cache-dir", "c", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert all(s["reused"] for s in json.loads((tmp_path / "out" / "_report.json").read_text())["shards"])


@pytest.mark.parametrize("shape", ["json-openai", "list-sharegpt", "json-sharegpt"])
def test_json_string_and_sharegpt_columns_named_or_found(tmp_path: Path, shape: str) -> None:
    as_json, sharegpt = shape.startswith("json"), shape.endswith("sharegpt")
    key = "conversations" if sharegpt else "chat_log"  # chat_log is not a known name: named with --messages-column
    df = frame(5, key=key, as_json=as_json, sharegpt=sharegpt)
    df.write_parquet(tmp_path / "d.parquet", row_group_size=2)
    named = [] if key == "conversations" else ["--messages-column", key]
    r = ctxtool("truncate", "d.parquet", "-o", "t.parquet", *TIGHT, "--cache-dir", "c", *named, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    cut = pl.read_parquet(tmp_path / "t.parquet")
    assert not cut.equals(df) and cut.drop(key).equals(df.drop(key))
    # a list of structs gains ctxtool's own message field (what restore needs) as JSON text; a JSON string keeps its type
    assert cut.schema[key] == df.schema[key] if as_json else "ctxtool" in str(cut.schema[key])
    r = ctxtool("restore", "t.parquet", "-o", "b.parquet", "--cache-dir", "c", *named, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert pl.read_parquet(tmp_path / "b.parquet").equals(df)
    if not named:
        return
    r = ctxtool("stats", "d.parquet", "--json", cwd=tmp_path)  # not found by name: a usage error naming the option
    assert r.returncode == 2 and "--messages-column" in r.stderr and "Traceback" not in r.stderr


def _jsonl(df: Any, path: Path) -> Path:
    """The same rows as a JSON Lines dataset (nulls of the structs left out, as ctxtool reads them)."""
    def clean(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items() if x is not None}
        return [clean(x) for x in v] if isinstance(v, list) else v

    with path.open("w") as fh:
        for rec in df.select("messages", "instance_id").to_dicts():
            fh.write(json.dumps({"messages": clean(rec["messages"]), "instance_id": rec["instance_id"]}) + "\n")
    return path


def _messages(path: Path) -> list[Any]:
    if path.suffix == ".parquet":  # ctxtool's own field of a message is JSON text in a list of structs
        return [[{**m, "ctxtool": json.loads(m["ctxtool"])} if m.get("ctxtool") else m for m in c]
                for c in pl.read_parquet(path)["messages"].to_list()]
    return [json.loads(line)["messages"] for line in path.read_text().splitlines()]


def _strip(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _strip(x) for k, x in v.items() if x is not None}
    return [_strip(x) for x in v] if isinstance(v, list) else v


@pytest.mark.parametrize("command", [
    ["window", "--max-messages", "5"],
    ["cut", "-k", "300"],
    ["repair"],
    ["compact", "--force", "--keep-recent-tokens", "200", "--on-error", "skip"],
    ["trim", "--budget", "200"],
])
def test_each_command_writes_what_it_writes_for_the_same_jsonl(tmp_path: Path, command: list[str]) -> None:
    df = frame(6)
    df.write_parquet(tmp_path / "d.parquet", row_group_size=4)
    _jsonl(df, tmp_path / "d.jsonl")
    name, *opts = command
    extra = ["--cache-dir", "c"] if name == "trim" else []
    for src, out in (("d.parquet", "o.parquet"), ("d.jsonl", "o.jsonl")):
        r = ctxtool(name, src, "-o", out, *opts, *extra, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    got = pl.read_parquet(tmp_path / "o.parquet")
    assert got.drop("messages").equals(df.drop("messages")) and got.drop("messages").schema == df.drop("messages").schema
    # the same messages; ctxtool's own field may differ: a stash holds the message's source text, and a
    # row's text is not the JSON Lines file's
    def own(ms: list[Any]) -> list[Any]:
        return [[{k: v for k, v in m.items() if k != "ctxtool"} for m in c] for c in ms]

    assert own([_strip(m) for m in _messages(tmp_path / "o.parquet")]) == own(_messages(tmp_path / "o.jsonl"))


def test_stats_and_validate_read_what_the_jsonl_reads(tmp_path: Path) -> None:
    paths = hf_layout(tmp_path / "ds", shards=2, rows=5)
    both = pl.concat([pl.read_parquet(p) for p in paths])
    _jsonl(both, tmp_path / "d.jsonl")
    a = json.loads(ctxtool("stats", "ds", "--json", cwd=tmp_path).stdout)
    b = json.loads(ctxtool("stats", "d.jsonl", "--json", cwd=tmp_path).stdout)
    assert a["totals"] == b["totals"] and a["totals"]["transcripts"] == 10
    assert [t["id"] for t in a["transcripts"]] == [f"repo__issue-{i}" for i in range(10)]
    assert a["transcripts"][0]["path"].endswith("train-00000-of-00002.parquet")
    v = ctxtool("validate", "ds", "--json", cwd=tmp_path)
    assert v.returncode == 0, v.stderr
    assert json.loads(v.stdout)["totals"]["transcripts"] == 10 and json.loads(v.stdout)["totals"]["files"] == 2


def test_a_bad_row_is_named_and_skip_leaves_it_out(tmp_path: Path) -> None:
    df = frame(4, as_json=True)
    df = df.with_columns(pl.when(pl.col("instance_id") == "repo__issue-2").then(pl.lit("[{not json"))
                         .otherwise(pl.col("messages")).alias("messages"))
    df.write_parquet(tmp_path / "d.parquet")
    r = ctxtool("window", "d.parquet", "-o", "w.parquet", "--max-messages", "3", cwd=tmp_path)
    assert r.returncode == 3 and "d.parquet:3" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "w.parquet").exists()
    r = ctxtool("window", "d.parquet", "-o", "w.parquet", "--max-messages", "3", "--on-error", "skip", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = pl.read_parquet(tmp_path / "w.parquet")
    assert out["instance_id"].to_list() == ["repo__issue-0", "repo__issue-1", "repo__issue-3"]


def test_usage_errors(tmp_path: Path) -> None:
    frame(2).write_parquet(tmp_path / "d.parquet")
    (tmp_path / "d.jsonl").write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n")
    for args, says in [
        (["stats", "d.parquet", "--messages-column", "nope"], "no column 'nope'"),
        (["stats", "d.parquet", "--messages-column", "score"], "list of structs or a JSON string"),
        (["stats", "d.jsonl", "--messages-column", "messages"], "Parquet"),
        (["window", "d.parquet", "--max-messages", "2"], "stdout"),
        (["window", "d.parquet", "-o", "w.jsonl", "--to", "openai", "--max-messages", "2"], "--to"),
    ]:
        r = ctxtool(*args, cwd=tmp_path)
        assert r.returncode == 2 and says in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)


def test_fsspec_urls_and_the_library(tmp_path: Path) -> None:
    import fsspec

    df = frame(4)
    fs = fsspec.filesystem("memory")
    with fs.open("/pq/in/d.parquet", "wb") as fh:
        df.write_parquet(fh, row_group_size=2)
    rep = tools_ops.truncate_file("memory://pq/in/d.parquet", "memory://pq/out/d.parquet",
                                  limits=Limits(max_lines=5, max_bytes=400), cache=tmp_path / "c")
    assert rep.truncated > 0 and rep.transcripts == 4
    tools_ops.restore_file("memory://pq/out/d.parquet", "memory://pq/back/d.parquet", cache=tmp_path / "c")
    with fs.open("/pq/back/d.parquet", "rb") as fh:
        assert pl.read_parquet(fh).equals(df)
    # a directory of shards on the local engine, as a library call: one shard per file
    hf_layout(tmp_path / "ds", shards=2, rows=3)
    with get_engine("local", workers=2) as eng:
        run = run_file(WindowOp(max_messages=4), str(tmp_path / "ds"), str(tmp_path / "w"), engine=Sharding(eng))
    assert run.transcripts == 6 and shard_names(tmp_path / "w") == shard_names(tmp_path / "ds")
    with pytest.raises(CtxtoolError, match="Parquet"):
        with get_engine("local") as eng:
            run_file(WindowOp(max_messages=4), str(tmp_path / "ds"), str(tmp_path / "w.jsonl"),
                     engine=Sharding(eng, join=True))
