"""``--engine ray`` through the real CLI (a ``ctxtool`` process joining a cluster with
``--address``), as docs/distributed.md shows it: ``compact --max-in-flight`` against a
loopback model that answers 429 above the limit, for every summarizer that sends requests;
Parquet shards truncated, restored and counted on Ray; and a cluster of one head and two
worker nodes started with ``ray start`` on this machine, where a ``compact`` killed halfway
resumes without redoing finished shards or asking the model again for what it answered; and
what the cluster reports to a run's driver kept off its stdout."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_llm import FakeLLM
from test_compact import conversation
from test_engine_ray import cluster  # noqa: F401  (the session's local Ray cluster)
from test_fsspec import s3_server  # noqa: F401  (the cluster fixture starts after it)

ray = pytest.importorskip("ray")
pl = pytest.importorskip("polars")

pytestmark = [pytest.mark.xdist_group("ray"), pytest.mark.filterwarnings("ignore::DeprecationWarning")]

REPLY = "## Goal\nship the parser\n\n## Next Steps\n1. run the tests\n"
COMPACT = ["--force", "--keep-recent-tokens", "400", "--summary-model", "m", "-j", "3"]
#: a --summarizer command that asks the loopback model over HTTP (so the server counts its requests in flight)
ASK = """import json, sys, urllib.request
prompt = sys.stdin.read()
body = json.dumps({"model": "m", "messages": [{"role": "user", "content": prompt}]}).encode()
req = urllib.request.Request(sys.argv[1] + "/chat/completions", body, {"content-type": "application/json"})
print(json.load(urllib.request.urlopen(req, timeout=60))["choices"][0]["message"]["content"])
"""


def ctxtool(*args: str, env: dict[str, str] | None = None, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ctxtool", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "CTXTOOL_SUMMARIZER_RETRIES": "0", **(env or {})})


def address() -> str:
    return str(ray.get_runtime_context().gcs_address)


def inputs(d: Path, files: int, per_file: int) -> Path:
    """``files`` datasets of ``per_file`` distinct transcripts (each file one shard of a compact run)."""
    d.mkdir(parents=True, exist_ok=True)
    for f in range(files):
        with (d / f"d{f}.jsonl").open("w") as fh:
            for i in range(per_file):
                tag = f"f{f}r{i}"
                fh.write(json.dumps({"id": tag, "messages": conversation(turns=3, tag=tag, filler=300)}) + "\n")
    return d


def parts(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.glob("part-*"))}


@pytest.mark.parametrize("kind", ["openai", "anthropic", "command"])
def test_compact_max_in_flight_from_the_cli_on_ray(cluster: None, tmp_path: Path, kind: str) -> None:  # noqa: F811
    src = inputs(tmp_path / "in", files=4, per_file=3)
    with FakeLLM(reply=REPLY, latency=0.15, rate_limit_above=2) as llm:
        model = ["--summarizer", kind] + (
            ["--command", f"{sys.executable} {tmp_path / 'ask.py'} {llm.openai_base}"] if kind == "command"
            else ["--base-url", llm.base_url(kind)])
        (tmp_path / "ask.py").write_text(ASK)
        run = ["compact", str(src / "*.jsonl"), "--engine", "ray", "--address", address(), "--max-in-flight", "2",
               *COMPACT, *model, "--cache-dir", str(tmp_path / "cache")]
        r = ctxtool(*run, "-o", str(tmp_path / "out") + "/")
        assert r.returncode == 0, r.stderr
        assert "ThreadLimiter" not in r.stderr
        # 4 shards x 3 threads could send 12 at once: the cluster-wide limiter let 2 through, and no 429 came back
        assert len(llm.requests) == 12 and llm.rate_limited == 0 and llm.max_in_flight <= 2
        report = json.loads((tmp_path / "out" / "_report.json").read_text())
        assert report["engine"] == "ray" and len(report["shards"]) == 4 and report["transcripts"] == 12
        if kind != "openai":
            return
        # the same run again: every shard was done, nothing is sent
        again = ctxtool(*run, "-o", str(tmp_path / "out") + "/")
        assert again.returncode == 0, again.stderr
        assert all(s["reused"] for s in json.loads((tmp_path / "out" / "_report.json").read_text())["shards"])
        # into a new directory: every summary comes from the cache directory the workers share
        fresh = ctxtool(*run, "-o", str(tmp_path / "out2") + "/")
        assert fresh.returncode == 0, fresh.stderr
        assert "12 hit(s), 0 miss(es)" in fresh.stdout + fresh.stderr
        assert len(llm.requests) == 12
    assert parts(tmp_path / "out2") == parts(tmp_path / "out") and len(parts(tmp_path / "out")) == 4


def test_parquet_shards_on_ray_data_from_the_cli(cluster: None, tmp_path: Path) -> None:  # noqa: F811
    """Ray Data's read_parquet and write_parquet carry each shard: truncate -> restore through the
    CLI gives back equal tables shard by shard, under the input shards' names, with their schema
    (metadata too) and row groups; the truncated shards equal a run on this host; a re-run
    skips every finished shard."""
    from test_parquet import TIGHT, hf_layout, shard_names

    from ctxtool.run.engines.ray_parquet import IO

    pq = pytest.importorskip("pyarrow.parquet")
    paths = hf_layout(tmp_path / "swe", shards=3, rows=30)  # row groups of 2 rows: Ray Data cuts its own blocks
    on_ray = ["--engine", "ray", "--address", address()]
    r = ctxtool("truncate", str(tmp_path / "swe"), "-o", str(tmp_path / "t"), *TIGHT, "--cache-dir",
                str(tmp_path / "c"), *on_ray)
    assert r.returncode == 0, r.stderr
    assert shard_names(tmp_path / "t") == shard_names(tmp_path / "swe") == [
        f"data/train-0000{k}-of-00003.parquet" for k in range(3)]
    assert sorted(p.name for p in (tmp_path / "t" / "data").iterdir()) == [p.name for p in paths]  # nothing else
    report = json.loads((tmp_path / "t" / "_report.json").read_text())
    assert [s["io"] for s in report["shards"]] == [IO] * 3 and report["transcripts"] == 90
    here = ctxtool("truncate", str(tmp_path / "swe"), "-o", str(tmp_path / "here"), *TIGHT, "--cache-dir",
                   str(tmp_path / "c2"))
    assert here.returncode == 0, here.stderr
    for p in paths:
        rel = p.relative_to(tmp_path / "swe")
        out = pl.read_parquet(tmp_path / "t" / rel)
        assert not out.equals(pl.read_parquet(p))  # cut
        assert out.to_dicts() == pl.read_parquet(tmp_path / "here" / rel).to_dicts()  # as this host cuts it
        assert pq.read_schema(tmp_path / "t" / rel) == pq.read_schema(tmp_path / "here" / rel)
        assert pq.ParquetFile(tmp_path / "t" / rel).metadata.num_row_groups == pq.ParquetFile(p).metadata.num_row_groups
    r = ctxtool("restore", str(tmp_path / "t"), "-o", str(tmp_path / "b"), "--cache-dir", str(tmp_path / "c"), *on_ray)
    assert r.returncode == 0, r.stderr
    assert shard_names(tmp_path / "b") == shard_names(tmp_path / "swe")
    for p in paths:
        rel = p.relative_to(tmp_path / "swe")
        assert pl.read_parquet(tmp_path / "b" / rel).equals(pl.read_parquet(p))
        assert pq.read_schema(tmp_path / "b" / rel).equals(pq.read_schema(p), check_metadata=True)
    # resume: every finished shard is skipped, its file left as it was
    stamps = {p: p.stat().st_mtime_ns for p in (tmp_path / "t").rglob("*.parquet")}
    again = ctxtool("truncate", str(tmp_path / "swe"), "-o", str(tmp_path / "t"), *TIGHT, "--cache-dir",
                    str(tmp_path / "c"), *on_ray)
    assert again.returncode == 0, again.stderr
    assert all(s["reused"] for s in json.loads((tmp_path / "t" / "_report.json").read_text())["shards"])
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "t").rglob("*.parquet")} == stamps
    a = ctxtool("stats", str(tmp_path / "swe"), "--json", *on_ray)
    b = ctxtool("stats", str(tmp_path / "swe"), "--json")
    assert a.returncode == b.returncode == 0, a.stderr + b.stderr
    assert json.loads(a.stdout)["totals"] == json.loads(b.stdout)["totals"]
    assert json.loads(a.stdout)["totals"]["transcripts"] == 90


def test_the_commands_docs_distributed_shows(cluster: None, s3_server: str, tmp_path: Path) -> None:  # noqa: F811
    """docs/distributed.md's Ray commands, each through a ctxtool process (joined with --address:
    without it each would start a cluster of its own), against the same runs on this host."""
    import boto3
    from test_compact import write_dataset
    from test_parquet import hf_layout

    s3 = boto3.client("s3", endpoint_url=s3_server, region_name="us-east-1")
    data = write_dataset(tmp_path / "big.jsonl", n=10, turns=3, filler=3000)
    lines = data.read_bytes().splitlines(keepends=True)
    for k in range(2):
        s3.put_object(Bucket="ctx", Key=f"doc/in/d{k}.jsonl", Body=b"".join(lines[k * 5:(k + 1) * 5]))
    for p in hf_layout(tmp_path / "swe", shards=2, rows=3):
        s3.put_object(Bucket="ctx", Key=f"doc/swe/{p.relative_to(tmp_path / 'swe').as_posix()}", Body=p.read_bytes())
    on_ray = ["--engine", "ray", "--address", address()]
    cmds = [
        ["truncate", "s3://ctx/doc/in/*.jsonl", "-o", "s3://ctx/doc/out/", "--cache-dir", "s3://ctx/doc/cache"],
        ["window", str(data), "-o", str(tmp_path / "small.jsonl"), "--join", "--max-messages", "40"],
        ["truncate", "s3://ctx/doc/swe/", "-o", "s3://ctx/doc/swe-cut/", "--cache-dir", "s3://ctx/doc/cache",
         "--max-lines", "5"],
    ]
    for cmd in cmds:
        r = ctxtool(*cmd, *on_ray)
        assert r.returncode == 0, (cmd, r.stderr)
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket="ctx", Prefix="doc/")["Contents"]}
    assert {"doc/out/part-00000.jsonl", "doc/out/part-00001.jsonl", "doc/swe-cut/data/train-00000-of-00002.parquet",
            "doc/swe-cut/data/train-00001-of-00002.parquet"} <= keys
    r = ctxtool("window", str(data), "-o", str(tmp_path / "local.jsonl"), "--max-messages", "40")
    assert r.returncode == 0 and (tmp_path / "small.jsonl").read_bytes() == (tmp_path / "local.jsonl").read_bytes()
    a, b = ctxtool("stats", str(data), "--json", *on_ray), ctxtool("stats", str(data), "--json")
    assert a.returncode == b.returncode == 0 and json.loads(a.stdout)["totals"] == json.loads(b.stdout)["totals"]
    # the Parquet shards cut on object storage come back whole
    r = ctxtool("restore", "s3://ctx/doc/swe-cut/", "-o", str(tmp_path / "back") + "/", "--cache-dir", "s3://ctx/doc/cache")
    assert r.returncode == 0, r.stderr
    for k in range(2):
        name = f"data/train-0000{k}-of-00002.parquet"
        assert pl.read_parquet(tmp_path / "back" / name).equals(pl.read_parquet(tmp_path / "swe" / name))


def test_what_the_cluster_reports_stays_off_stdout(cluster: None, tmp_path: Path) -> None:  # noqa: F811
    """The raylet's "N PYTHON worker processes have been started ..." warning travels on the
    cluster's error channel to every driver, whose listener thread printed it on stdout whatever
    ``log_to_driver`` said: ahead of ``stats --json``'s document. Messages published on that
    channel all through a run reach the run's stderr; its stdout is the JSON document alone."""
    from ray._private.utils import publish_error_to_driver
    from test_parquet import hf_layout

    hf_layout(tmp_path / "swe", shards=2, rows=4)
    gcs = ray._private.worker.global_worker.gcs_client
    stop = threading.Event()

    def warn() -> None:  # as the raylet's worker pool does (error type "worker_pool_large", to every driver)
        k = 0
        while not stop.is_set():
            k += 1
            publish_error_to_driver("worker_pool_large", f"WARNING: {k} PYTHON worker processes have been started "
                                    "(sent by the test)", gcs)
            stop.wait(0.2)

    t = threading.Thread(target=warn, daemon=True)
    t.start()
    try:
        r = ctxtool("stats", str(tmp_path / "swe"), "--json", "--engine", "ray", "--address", address())
    finally:
        stop.set()
        t.join()
    assert r.returncode == 0, r.stderr
    assert "(sent by the test)" in r.stderr  # the run heard the cluster ...
    assert "(sent by the test)" not in r.stdout  # ... and kept it off the data
    assert json.loads(r.stdout)["totals"]["transcripts"] == 8 and r.stdout.startswith("{")


# -- one head and two worker nodes, started with `ray start` ------------------------------------------


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ray_start(*args: str, log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """``ray start ... --block`` in a process group of its own (stopped by its id, with what it started)."""
    exe = Path(sys.executable).with_name("ray")
    with log.open("ab") as out:
        return subprocess.Popen([str(exe), "start", "--block", "--disable-usage-stats", *args], stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True, env=env)


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in reversed(procs):  # the worker nodes, then the head
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(10)


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[tuple[str, dict[str, str]]]:
    """A head with no CPU (nothing runs beside the driver) and two worker nodes of one CPU each;
    its address and the environment that joins it (a token of its own: Ray's token authentication)."""
    if not Path(sys.executable).with_name("ray").exists():
        pytest.skip("the ray command is not installed")
    tmp = tempfile.mkdtemp(prefix="r", dir="/tmp")  # short: Ray's socket paths must fit
    port = _port()
    addr = f"127.0.0.1:{port}"
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": os.urandom(16).hex()}
    log = Path(tmp) / "start.log"
    procs = [_ray_start("--head", f"--port={port}", "--num-cpus=0", "--include-dashboard=false",
                        f"--temp-dir={tmp}", "--node-ip-address=127.0.0.1", log=log, env=env)]
    try:
        deadline = time.monotonic() + 120
        while not _listening(port):
            if time.monotonic() > deadline or procs[0].poll() is not None:
                pytest.fail("the head did not start: " + log.read_text()[-2000:])
            time.sleep(0.5)
        for k in (1, 2):  # one at a time: two raylets starting at once on a loaded machine time out
            procs.append(_ray_start(f"--address={addr}", "--num-cpus=1", "--node-ip-address=127.0.0.1", log=log,
                                    env=env))
            deadline = time.monotonic() + 180
            while _alive_with_cpus(addr, env) < k:
                if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                    pytest.fail("the two-node cluster did not start: " + log.read_text()[-2000:])
                time.sleep(2)
        yield addr, env
    finally:
        _stop(procs)


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _alive_with_cpus(addr: str, env: dict[str, str]) -> int:
    code = ("import ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR', log_to_driver=False);"
            "print(sum(1 for n in ray.nodes() if n['Alive'] and n['Resources'].get('CPU', 0) > 0))")
    r = subprocess.run([sys.executable, "-c", code, addr], capture_output=True, text=True, timeout=120, env=env)
    return int(r.stdout.strip() or 0) if r.returncode == 0 else 0


def test_kill_and_resume_on_two_worker_nodes(two_nodes: tuple[str, dict[str, str]], tmp_path: Path) -> None:
    addr, env = two_nodes
    src = inputs(tmp_path / "in", files=6, per_file=2)
    with FakeLLM(reply=REPLY, latency=0.6, rate_limit_above=2) as llm:
        run = ["compact", str(src / "*.jsonl"), "-o", str(tmp_path / "out") + "/", "--engine", "ray", "--address",
               addr, "--max-in-flight", "2", *COMPACT, "--summarizer", "openai", "--base-url", llm.openai_base,
               "--cache-dir", str(tmp_path / "cache")]
        first = subprocess.Popen([sys.executable, "-m", "ctxtool", *run], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, env={**env, "CTXTOOL_SUMMARIZER_RETRIES": "0"})
        done = tmp_path / "out" / "_done"
        deadline = time.monotonic() + 300
        # halfway: the first shard is finished (its entry renamed into place: a ".tmp" one is still being written)
        while not (done.is_dir() and any(p.suffix == ".json" for p in done.iterdir())):
            assert first.poll() is None, first.stderr.read() if first.stderr else ""
            assert time.monotonic() < deadline
            time.sleep(0.1)
        first.kill()
        first.wait()
        asked_first = [r.prompt for r in llm.requests]
        finished = {p.name.removesuffix(".json") for p in done.iterdir() if p.suffix == ".json"}
        assert 1 <= len(finished) < 6 and llm.rate_limited == 0
        second = ctxtool(*run, env=env)
        assert second.returncode == 0, second.stderr
        report = json.loads((tmp_path / "out" / "_report.json").read_text())
        reused = {s["name"] for s in report["shards"] if s["reused"]}
        assert reused >= finished and report["transcripts"] == 12 and len(report["shards"]) == 6
        asked_again = [r.prompt for r in llm.requests[len(asked_first):]]
        # no transcript of a finished shard is asked again; a summary answered before the kill comes from the
        # cache; only a request still in flight when the run was killed (at most --max-in-flight) is sent again
        tags = {json.loads(line)["id"] for n in reused for line in (src / f"d{int(n[5:10])}.jsonl").read_text().splitlines()}
        assert not any(f"_{t}.py" in p for p in asked_again for t in tags)
        assert len(asked_first) + len(asked_again) - 12 <= 2
        assert llm.max_in_flight <= 2 and llm.rate_limited == 0
    # the same bytes as one uninterrupted run on this host (the loopback model answers each prompt the same way)
    with FakeLLM(reply=REPLY) as llm:
        ref = ctxtool("compact", str(src / "*.jsonl"), "-o", str(tmp_path / "ref") + "/", *COMPACT, "--summarizer",
                      "openai", "--base-url", llm.openai_base, "--cache-dir", str(tmp_path / "cache2"))
        assert ref.returncode == 0, ref.stderr
    assert parts(tmp_path / "out") == parts(tmp_path / "ref") and len(parts(tmp_path / "ref")) == 6


def test_a_cluster_that_cannot_start_is_a_clean_failure_not_a_bug(tmp_path: Path) -> None:
    """A local cluster that cannot start (Ray's temporary directory is a file here) ends the
    run with one line and status 6 (REMOTE), as a summary model that cannot be reached does;
    before, it was an internal error (status 1)."""
    src = tmp_path / "d.jsonl"
    src.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n")
    not_a_dir = tmp_path / "ray-tmp"
    not_a_dir.write_text("a file, not a directory\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_ADDRESS")}
    run = subprocess.run([sys.executable, "-m", "ctxtool", "stats", str(src), "--engine", "ray"], capture_output=True,
                         text=True, timeout=300, env={**env, "RAY_TMPDIR": str(not_a_dir)})
    lines = [ln for ln in run.stderr.splitlines() if ln.startswith("ctxtool:")]
    assert run.returncode == 6, run.stderr
    assert run.stdout == ""
    assert len(lines) == 1 and "a local Ray cluster could not be started or reached" in lines[0], run.stderr
    assert str(not_a_dir) in lines[0] and "Traceback" not in run.stderr


def test_an_address_where_nothing_listens_ends_the_run_at_once(tmp_path: Path) -> None:
    """``--address`` of a port where nothing listens: one line and status 6 (REMOTE), before
    Ray's own retries (minutes of a warning every 5 s); stdout stays empty."""
    import socket

    src = tmp_path / "d.jsonl"
    src.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n")
    with socket.socket() as s:  # a port that was free a moment ago, closed again: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for address in (f"127.0.0.1:{port}", f"ray://127.0.0.1:{port}"):
        run = subprocess.run([sys.executable, "-m", "ctxtool", "stats", str(src), "--engine", "ray", "--address", address],
                             capture_output=True, text=True, timeout=120)
        lines = [ln for ln in run.stderr.splitlines() if ln.startswith("ctxtool:")]
        assert run.returncode == 6, run.stderr
        assert run.stdout == "" and "Traceback" not in run.stderr
        assert len(lines) == 1 and f"the Ray cluster at {address} could not be reached" in lines[0], run.stderr
