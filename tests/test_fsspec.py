"""Paths anywhere: inputs, outputs and both caches as fsspec URLs (``memory://`` in this
process; ``s3://`` through a real S3-compatible server on 127.0.0.1: moto's server mode)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_llm import FakeLLM
from test_compact import opts, write_dataset

from ctxtool.cache import RefCache
from ctxtool.cli import main
from ctxtool.compaction import run as cp
from ctxtool.io import urls
from ctxtool.summarizers import get_summarizer
from ctxtool.summarizers.cache import CachedSummarizer
from ctxtool.tool_outputs import files as tools_ops
from ctxtool.tool_outputs.algorithms import Limits

fsspec = pytest.importorskip("fsspec")

TIGHT = Limits(max_lines=20, max_bytes=2000, max_chars=3000, spill_threshold=40_000, max_line_length=300)


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([str(a) for a in args])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


@pytest.fixture
def mem() -> Iterator[str]:
    """A fresh ``memory://`` folder (fsspec's in-process filesystem)."""
    root = f"memory://t-{uuid.uuid4().hex[:8]}"
    yield root
    fs, p = urls.filesystem(root)
    if fs.exists(p):
        fs.rm(p, recursive=True)


def manifest_entries(cache: RefCache) -> list[dict[str, Any]]:
    """Every manifest line of every shard, without its time, sorted: what two runs compare."""
    out = []
    for line in cache._manifest_lines():
        e = json.loads(line)
        e.pop("created")
        out.append(e)
    return sorted(out, key=lambda e: json.dumps(e, sort_keys=True))


def test_urls_name_things_and_local_paths_stay_local(tmp_path: Path) -> None:
    assert urls.is_url("s3://b/k") and urls.is_url("memory://x") and not urls.is_url("/tmp/x")
    assert not urls.is_url("file:///tmp/x") and urls.local("file:///tmp/x") == "/tmp/x"
    (tmp_path / "a.jsonl").write_text("{}\n")
    assert urls.expand(f"file://{tmp_path}/*.jsonl") == [str(tmp_path / "a.jsonl")]
    assert urls.expand(str(tmp_path / "none")) == [str(tmp_path / "none")]  # no glob: as given


def test_truncate_from_and_to_memory_urls_matches_local(tmp_path: Path, mem: str) -> None:
    src = write_dataset(tmp_path / "d.jsonl", n=6, filler=6000)
    urls.put_bytes(f"{mem}/in/d.jsonl", src.read_bytes())
    local = tools_ops.truncate_file(str(src), str(tmp_path / "out.jsonl"), limits=TIGHT, cache=tmp_path / "c1")
    remote = tools_ops.truncate_file(f"{mem}/in/d.jsonl", f"{mem}/out/d.jsonl", limits=TIGHT, cache=f"{mem}/cache")
    assert local.truncated == remote.truncated > 0
    assert urls.read_bytes(f"{mem}/out/d.jsonl") == (tmp_path / "out.jsonl").read_bytes()
    a, b = RefCache(tmp_path / "c1"), RefCache(f"{mem}/cache")
    assert sorted(a.manifest()) == sorted(b.manifest())
    for e in manifest_entries(b):  # the input as the user named it, never a local copy
        assert e["source"]["file"] == f"{mem}/in/d.jsonl"
    assert b.verify().ok == len(b.manifest()) and not b.verify().corrupted
    # restore from the URL cache gives the input back, byte for byte
    tools_ops.restore_file(f"{mem}/out/d.jsonl", f"{mem}/back.jsonl", cache=f"{mem}/cache")
    assert urls.read_bytes(f"{mem}/back.jsonl") == src.read_bytes()


def test_a_compressed_url_output_is_uploaded_whole(tmp_path: Path, mem: str) -> None:
    src = write_dataset(tmp_path / "d.jsonl", n=2)
    tools_ops.restore_file(str(src), f"{mem}/o.jsonl.gz", cache=tmp_path / "c")
    import gzip

    assert gzip.decompress(urls.read_bytes(f"{mem}/o.jsonl.gz")) == src.read_bytes()


def test_stats_reads_a_url_glob(tmp_path: Path, mem: str, capsys: pytest.CaptureFixture[str]) -> None:
    for i in range(3):
        src = write_dataset(tmp_path / f"d{i}.jsonl", n=2 + i)
        urls.put_bytes(f"{mem}/ds/d{i}.jsonl", src.read_bytes())
    code, out, err = cli(capsys, "stats", f"{mem}/ds/*.jsonl", "--json")
    assert code == 0, err
    code, out2, _ = cli(capsys, "stats", *(str(tmp_path / f"d{i}.jsonl") for i in range(3)), "--json")
    strip = lambda s: json.dumps({k: v for k, v in json.loads(s).items() if k not in ("transcripts", "largest_tool_outputs")})  # noqa: E731
    assert json.loads(out)["totals"] == json.loads(out2)["totals"] and strip(out) == strip(out2)
    assert json.loads(out)["totals"]["transcripts"] == 2 + 3 + 4
    code, _, err = cli(capsys, "stats", f"{mem}/ds/*.nothing")
    assert code != 0 and "no file matches" in err and len(err.strip().splitlines()) == 1


def test_manifest_shards_are_merged_and_the_old_single_manifest_still_read(tmp_path: Path) -> None:
    root = tmp_path / "c"
    with RefCache(root, task="a") as c:
        one = c.put("first output\n", source={"file": "x"})
    with RefCache(root, task="b") as c:
        two = c.put("second output\n", source={"file": "y"})
        c.put("first output\n", source={"file": "z"})
    assert sorted(p.name for p in (root / "manifest").iterdir()) == ["a.jsonl", "b.jsonl"]
    old = {"id": "0" * 64, "sha256": "0" * 64, "byte_size": 1, "line_count": 1, "kind": "output", "created": 1.0}
    (root / "manifest.jsonl").write_text(json.dumps(old) + "\n")  # what earlier versions appended to
    man = RefCache(root).manifest()
    assert set(man) == {one.id, two.id, "0" * 64}
    assert [s["file"] for s in man[one.id].sources] == ["x", "z"]
    gc = RefCache(root).gc([two.id], dry_run=False)  # gc folds the kept entries into one manifest
    assert [r.id for r in gc.deleted] == [one.id]
    assert set(RefCache(root).manifest()) == {two.id}
    assert not list((root / "manifest").iterdir())


def test_ref_cache_on_a_url(mem: str) -> None:
    with RefCache(f"{mem}/cache") as c:
        info = c.put("line one\nline two\n", source={"file": "a.jsonl"})
        assert c.read_text(info.id) == "line one\nline two\n" and c.read_text(info.id[:10]) == "line one\nline two\n"
    c = RefCache(f"{mem}/cache")
    assert list(c.manifest()) == [info.id] and c.exists(info.id)
    assert c.show(info.id).total_lines == 2 and c.grep("two").matches
    assert c.verify().ok == 1
    assert c.gc([], dry_run=False).bytes_freed > 0
    assert not RefCache(f"{mem}/cache").exists(info.id)


def test_summary_cache_on_a_url_and_key_without_the_address(tmp_path: Path, mem: str) -> None:
    src = write_dataset(tmp_path / "d.jsonl", n=3, turns=3, filler=300)

    def summ(llm: FakeLLM) -> Any:
        return CachedSummarizer(get_summarizer("openai", base_url=llm.openai_base, model="m", api_key="k", retries=0),
                                f"{mem}/cache")

    with FakeLLM(reply="## Goal\nA summary.\n") as first:
        cp.compact_file(src, tmp_path / "o1.jsonl", options=opts(), summarizer=summ(first))
        assert len(first.requests) == 3
    with FakeLLM(reply="never asked") as second:  # the same model behind another port
        again = cp.compact_file(src, tmp_path / "o2.jsonl", options=opts(), summarizer=summ(second))
        assert len(second.requests) == 0 and again.cache_hits == 3
    assert (tmp_path / "o1.jsonl").read_bytes() == (tmp_path / "o2.jsonl").read_bytes()
    assert len(urls.listdir(f"{mem}/cache/summaries")) == 3


# -- a real S3-compatible server on 127.0.0.1 --------------------------------------------------


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    pytest.importorskip("s3fs")
    moto_server = pytest.importorskip("moto.server")
    import os

    srv = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    srv.start()
    host, port = srv.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_ENDPOINT_URL": endpoint, "FSSPEC_S3_ENDPOINT_URL": endpoint}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    fsspec.config.conf["s3"] = {"endpoint_url": endpoint, "key": "testing", "secret": "testing"}
    import boto3

    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket="ctx")
    try:
        yield endpoint
    finally:
        fsspec.config.conf.pop("s3", None)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        srv.stop()


def test_s3_input_output_and_cache_through_a_real_server(
    s3_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import boto3

    s3 = boto3.client("s3", endpoint_url=s3_server, region_name="us-east-1")
    src = write_dataset(tmp_path / "d.jsonl", n=5, filler=6000)
    s3.put_object(Bucket="ctx", Key="in/d.jsonl", Body=src.read_bytes())
    code, _, err = cli(capsys, "truncate", "s3://ctx/in/d.jsonl", "-o", "s3://ctx/out/d.jsonl", "--max-lines", "20",
                       "--cache-dir", "s3://ctx/cache")
    assert code == 0, err
    code, _, err = cli(capsys, "truncate", str(src), "-o", str(tmp_path / "o.jsonl"), "--max-lines", "20",
                       "--cache-dir", str(tmp_path / "c"))
    assert code == 0, err
    got = s3.get_object(Bucket="ctx", Key="out/d.jsonl")["Body"].read()
    assert got == (tmp_path / "o.jsonl").read_bytes()
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="ctx", Prefix="cache/")["Contents"]]
    shards = [k for k in keys if k.startswith("cache/manifest/")]
    assert len(shards) == 1 and sum(k.startswith("cache/refs/") for k in keys) == len(RefCache(tmp_path / "c").manifest())
    code, out, err = cli(capsys, "restore", "s3://ctx/out/d.jsonl", "--cache-dir", "s3://ctx/cache")
    assert code == 0, err
    assert out.encode() == src.read_bytes()
    code, out, err = cli(capsys, "refs", "verify", "--cache-dir", "s3://ctx/cache", "--json")
    assert code == 0, err
    assert not json.loads(out)["corrupted"]


def test_a_cached_summarizer_travels_to_a_worker(tmp_path: Path, mem: str) -> None:
    import pickle

    from ctxtool.summarizers import SummaryRequest

    c = CachedSummarizer(get_summarizer("heuristic"), tmp_path / "cache")
    req = SummaryRequest(system="s", prompt="p")
    first = c.summarize(req)
    twin = pickle.loads(pickle.dumps(c))
    assert twin.summarize(req) == first and (twin.hits, twin.misses) == (1, 0)
