"""``--engine ray`` on a real local Ray cluster (one per test session, 2 CPUs, fractional
CPUs per task), compared byte for byte with the local engine: records, refs, manifest
entries, stats; resumable shard directories; a cluster-wide bound on summary requests."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_llm import FakeLLM
from test_compact import write_dataset
from test_fsspec import TIGHT, manifest_entries, s3_server  # noqa: F401  (a fixture)

from ctxtool.cache import RefCache
from ctxtool.history.window import WindowOp
from ctxtool.run.engines import Sharding, get_engine
from ctxtool.run.engines.limit import LimitedSummarizer
from ctxtool.run.runner import run_file
from ctxtool.stats.files import stats_files
from ctxtool.summarizers import SummaryRequest, get_summarizer
from ctxtool.tool_outputs import files as tools_ops

ray = pytest.importorskip("ray")

# one cluster: every test of this module on one xdist worker (make test: --dist loadgroup)
pytestmark = [pytest.mark.xdist_group("ray"), pytest.mark.filterwarnings("ignore::DeprecationWarning")]


@pytest.fixture(scope="session")
def cluster(s3_server: str) -> Iterator[None]:  # noqa: F811
    """A local Ray cluster for the session (the engine joins it instead of starting one);
    started after the S3 server, so that its workers see the server's address."""
    if not ray.is_initialized():  # the workers import this module's job functions too
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="WARNING",
                 runtime_env={"env_vars": {"PYTHONPATH": str(Path(__file__).parent)}})
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dataset(tmp_path_factory.mktemp("ray") / "d.jsonl", n=24, turns=3, filler=6000)


def shards(data: Path) -> int:
    return data.stat().st_size // 4 + 1  # four byte ranges


def test_truncate_shards_match_the_local_engine_byte_for_byte(cluster: None, data: Path, tmp_path: Path) -> None:
    plain = tools_ops.truncate_file(str(data), str(tmp_path / "plain.jsonl"), limits=TIGHT, cache=tmp_path / "c0")
    out: dict[str, Any] = {}
    for name in ("local", "ray"):
        with get_engine(name, workers=2) as eng:
            rep = tools_ops.truncate_file(str(data), str(tmp_path / name), limits=TIGHT, cache=tmp_path / f"c-{name}",
                                          engine=Sharding(eng, shard_bytes=shards(data)))
        out[name] = rep
    parts = sorted(p.name for p in (tmp_path / "ray").iterdir() if p.name.startswith("part-"))
    assert len(parts) == 4
    assert parts == sorted(p.name for p in (tmp_path / "local").iterdir() if p.name.startswith("part-"))
    for p in parts:
        assert (tmp_path / "ray" / p).read_bytes() == (tmp_path / "local" / p).read_bytes()
    joined = b"".join((tmp_path / "ray" / p).read_bytes() for p in parts)
    assert joined == (tmp_path / "plain.jsonl").read_bytes()
    assert out["ray"].truncated == out["local"].truncated == plain.truncated > 0
    assert out["ray"].transcripts == plain.transcripts == 24
    # the same refs, in files or packs (one process writing a file packs them; a shard with few keeps files)
    refs = [sorted(r.id for r in RefCache(tmp_path / c).list_refs() if r.present) for c in ("c0", "c-local", "c-ray")]
    assert refs[0] == refs[1] == refs[2] and refs[0]
    man = [manifest_entries(RefCache(tmp_path / c)) for c in ("c0", "c-local", "c-ray")]
    assert man[0] == man[1] == man[2]
    report = json.loads((tmp_path / "ray" / "_report.json").read_text())
    assert report["engine"] == "ray" and [s["name"] for s in report["shards"]] == parts
    assert [s["first_line"] for s in report["shards"]][0] == 1 and sum(s["transcripts"] for s in report["shards"]) == 24


def test_joined_output_restore_and_resume(cluster: None, data: Path, tmp_path: Path) -> None:
    with get_engine("ray") as eng:
        sh = Sharding(eng, join=True, shard_bytes=shards(data))
        tools_ops.truncate_file(str(data), str(tmp_path / "t.jsonl"), limits=TIGHT, cache=tmp_path / "c", engine=sh)
        tools_ops.restore_file(str(tmp_path / "t.jsonl"), str(tmp_path / "back.jsonl"), cache=tmp_path / "c", engine=sh)
        assert (tmp_path / "back.jsonl").read_bytes() == data.read_bytes()
        assert not (tmp_path / "t.jsonl.parts").exists()
        # a directory of shards: a re-run skips what is done, and redoes only what is missing
        op = WindowOp(max_messages=5)
        first = run_file(op, str(data), str(tmp_path / "w"), engine=Sharding(eng, shard_bytes=shards(data)))
        before = {p.name: p.read_bytes() for p in (tmp_path / "w").glob("part-*")}
        (tmp_path / "w" / "part-00002.jsonl").unlink()
        again = run_file(op, str(data), str(tmp_path / "w"), engine=Sharding(eng, shard_bytes=shards(data)))
        assert [s["reused"] for s in again.shards] == [True, True, False, True]  # type: ignore[attr-defined]
        assert again.transcripts == first.transcripts == 24
        after = {p.name: p.read_bytes() for p in (tmp_path / "w").glob("part-*")}
        assert after == before
        other = run_file(WindowOp(max_messages=6), str(data), str(tmp_path / "w"), engine=Sharding(eng, shard_bytes=shards(data)))
        assert not any(s["reused"] for s in other.shards)  # type: ignore[attr-defined]  # other settings: all redone


def test_stats_match_the_local_engine(cluster: None, data: Path) -> None:
    local = stats_files([str(data)]).to_json()
    with get_engine("ray") as eng:
        remote = stats_files([str(data)], engine=Sharding(eng, shard_bytes=shards(data))).to_json()
    assert json.dumps(remote, sort_keys=True) == json.dumps(local, sort_keys=True)


def test_cli_engine_ray_join(cluster: None, data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ctxtool.cli import main

    assert main(["window", str(data), "-o", str(tmp_path / "r.jsonl"), "--max-messages", "5", "--engine", "ray", "--join"]) == 0
    assert main(["window", str(data), "-o", str(tmp_path / "l.jsonl"), "--max-messages", "5"]) == 0
    assert (tmp_path / "r.jsonl").read_bytes() == (tmp_path / "l.jsonl").read_bytes()
    capsys.readouterr()
    assert main(["stats", str(data), "--engine", "ray", "--json"]) == 0
    r = capsys.readouterr().out
    assert main(["stats", str(data), "--json"]) == 0
    assert capsys.readouterr().out == r


def test_s3_glob_to_s3_shards_with_an_s3_cache(cluster: None, s3_server: str, data: Path, tmp_path: Path) -> None:  # noqa: F811
    import boto3

    s3 = boto3.client("s3", endpoint_url=s3_server, region_name="us-east-1")
    lines = data.read_bytes().splitlines(keepends=True)
    for k in range(2):
        (tmp_path / f"in{k}.jsonl").write_bytes(b"".join(lines[k * 12:(k + 1) * 12]))
        s3.put_object(Bucket="ctx", Key=f"ray/in/d{k}.jsonl", Body=(tmp_path / f"in{k}.jsonl").read_bytes())
    with get_engine("ray") as eng:
        rep = tools_ops.truncate_file("s3://ctx/ray/in/*.jsonl", "s3://ctx/ray/out", limits=TIGHT,
                                      cache="s3://ctx/ray/cache", engine=Sharding(eng))
    with get_engine("local") as eng:
        ref = tools_ops.truncate_file(str(tmp_path / "in*.jsonl"), str(tmp_path / "out"), limits=TIGHT,
                                      cache=tmp_path / "cache", engine=Sharding(eng))
    assert rep.truncated == ref.truncated > 0 and rep.transcripts == 24
    for k in range(2):
        got = s3.get_object(Bucket="ctx", Key=f"ray/out/part-0000{k}.jsonl")["Body"].read()
        assert got == (tmp_path / "out" / f"part-0000{k}.jsonl").read_bytes()
    report = json.loads(s3.get_object(Bucket="ctx", Key="ray/out/_report.json")["Body"].read())
    assert [s["input"] for s in report["shards"]] == ["s3://ctx/ray/in/d0.jsonl", "s3://ctx/ray/in/d1.jsonl"]

    def unsourced(c: RefCache) -> list[Any]:
        return [{k: v for k, v in e.items() if k != "source"} for e in manifest_entries(c)]

    remote = RefCache("s3://ctx/ray/cache")
    assert unsourced(remote) == unsourced(RefCache(tmp_path / "cache"))
    assert {e["source"]["file"] for e in manifest_entries(remote)} == {f"s3://ctx/ray/in/d{k}.jsonl" for k in range(2)}
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="ctx", Prefix="ray/cache/manifest/")["Contents"]]
    assert len(keys) == 2  # one manifest shard per task, none appended to


def _ask(job: tuple[str, Any, int]) -> str:
    """One summary request from a Ray task, through the cluster-wide limiter."""
    base_url, limiter, k = job
    inner = get_summarizer("openai", base_url=base_url, model="m", api_key="k", retries=0)
    summ = LimitedSummarizer(inner, limiter)
    return str(summ.summarize(SummaryRequest(system="s", prompt=f"summarize part {k}", max_tokens=64)))


def test_max_in_flight_holds_across_the_cluster(cluster: None) -> None:
    with FakeLLM(reply="## Goal\nok\n", latency=0.05, rate_limit_above=2) as llm, get_engine("ray") as eng:
        limiter = eng.limiter(2)
        got = eng.map(_ask, [(llm.openai_base, limiter, k) for k in range(12)])
        assert all(g.startswith("## Goal") for g in got) and len(got) == 12
        assert len(llm.requests) == 12 and llm.rate_limited == 0 and llm.max_in_flight <= 2
        assert limiter.peak <= 2  # type: ignore[attr-defined]


def test_compact_on_ray_with_the_heuristic_and_a_remote_model(cluster: None, data: Path, tmp_path: Path) -> None:

    from ctxtool.compaction.run import compact_file
    from ctxtool.compaction.settings import CompactOptions

    opts = CompactOptions(force=True, keep_recent_tokens=400)
    compact_file(data, tmp_path / "plain.jsonl", options=opts)
    reply = "## Goal\nship the parser\n\n## Next Steps\n1. run the tests\n"
    with get_engine("ray") as eng:
        rep = compact_file(str(data), str(tmp_path / "r.jsonl"), options=opts, engine=Sharding(eng, join=True))
        assert rep.count("compacted") == 24
        # a remote model travels to the workers as its settings (it opens its own connections there)
        with FakeLLM(reply=reply) as llm:
            summ = get_summarizer("openai", base_url=llm.openai_base, model="m", retries=0)
            compact_file(str(data), str(tmp_path / "m_local.jsonl"), options=opts, summarizer=summ)
            local_requests = len(llm.requests)
            compact_file(str(data), str(tmp_path / "m_ray.jsonl"), options=opts, summarizer=summ,
                            engine=Sharding(eng, join=True))
            assert local_requests > 0 and len(llm.requests) == 2 * local_requests
    assert (tmp_path / "r.jsonl").read_bytes() == (tmp_path / "plain.jsonl").read_bytes()
    assert (tmp_path / "m_ray.jsonl").read_bytes() == (tmp_path / "m_local.jsonl").read_bytes()


def test_processes_started_with_the_cluster_print_on_stderr() -> None:
    """While ``ray.init`` runs (it starts a local cluster's GCS server and raylet), descriptor 1
    is stderr's: a process started then prints on the run's stderr, and the run's own stdout is
    stdout again afterwards."""
    import subprocess
    import sys

    code = ("import subprocess, sys\n"
            "from ctxtool.run.engines.ray import _stdout_to_stderr\n"
            "print('before', flush=True)\n"
            "with _stdout_to_stderr():\n"
            "    subprocess.run([sys.executable, '-c', 'print(\"child\")'], check=True)\n"
            "print('after')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "before\nafter\n" and r.stderr == "child\n"
