"""Temporaries carry their owner's pid and the next run removes those of dead owners; a reader
that closes stdout early ends the command quietly with status 0."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from io_pipes import SAMPLES, run_ctxtool

from ctxtool.io import paths
from ctxtool.io.outputs import atomic_output

PI = SAMPLES / "pi_session.jsonl"


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_temporaries_are_named_for_their_owner(tmp_path: Path) -> None:
    with atomic_output(tmp_path / "out.jsonl") as out:
        out.write(b"{}\n")
        (tmp,) = [p for p in os.listdir(tmp_path) if p != "out.jsonl"]
        assert paths.owner_pid(tmp) == os.getpid() and tmp.startswith(".out.jsonl.")
    d = paths.make_temp_dir(tmp_path, "ctxtool-parts")
    assert paths.owner_pid(os.path.basename(d)) == os.getpid()
    assert sorted(os.listdir(tmp_path)) == sorted([os.path.basename(d), "out.jsonl"])


def test_the_next_run_removes_leftovers_of_dead_owners(tmp_path: Path) -> None:
    gone = dead_pid()
    dead_file = tmp_path / f".out.jsonl.ctxtool-{gone}-k2j4h5g6.tmp"
    dead_file.write_bytes(b"x" * 1000)
    dead_dir = tmp_path / f".ctxtool-parts.ctxtool-{gone}-a8b7c6d5"
    dead_dir.mkdir()
    (dead_dir / "0.part").write_bytes(b"y" * 1000)
    live = tmp_path / f".other.jsonl.ctxtool-{os.getpid()}-zz11yy22.tmp"  # this process is alive
    live.write_bytes(b"z")
    foreign = tmp_path / ".notes.txt.abc123.tmp"  # not ours: no owner in its name
    foreign.write_bytes(b"w")
    r = run_ctxtool("convert", str(PI), "--to", "pi", "-o", str(tmp_path / "out.jsonl"), cache=tmp_path / "c")
    assert r.returncode == 0, r.stderr
    assert not dead_file.exists() and not dead_dir.exists()
    assert live.exists() and foreign.exists() and (tmp_path / "out.jsonl").exists()


def test_a_killed_parallel_run_leaves_nothing_after_the_next_run(tmp_path: Path) -> None:
    line = (SAMPLES / "openai_dataset.jsonl").read_bytes()
    big = tmp_path / "in" / "big.jsonl"
    big.parent.mkdir()
    with big.open("wb") as fh:
        while fh.tell() < 9 * 1024 * 1024:  # over the size that runs on every core
            fh.write(line * 200)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    env = {**os.environ, "CTXTOOL_CACHE_DIR": str(tmp_path / "c")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxtool", "truncate", str(big), "--max-lines", "1", "-o", str(out_dir / "o.jsonl")],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not os.listdir(out_dir) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    if proc.poll() is not None:
        pytest.skip("the run finished before it could be killed")
    os.killpg(proc.pid, signal.SIGKILL)  # the run and its workers
    proc.wait()
    left = [n for n in os.listdir(out_dir) if n != "o.jsonl"]  # killed just after the rename: fine
    assert left or (out_dir / "o.jsonl").exists()
    assert all(paths.owner_pid(n) == proc.pid for n in left), left
    r = run_ctxtool("convert", str(PI), "--to", "pi", "-o", str(out_dir / "small.jsonl"), cache=tmp_path / "c")
    assert r.returncode == 0, r.stderr
    assert sorted(set(os.listdir(out_dir)) - {"o.jsonl"}) == ["small.jsonl"]


@pytest.mark.parametrize(
    "args",
    [
        ["stats", "{p}"],
        ["stats", "{p}", "--json"],
        ["convert", "{p}", "--to", "ctxtool"],
        ["cut", "{p}"],
    ],
    ids=lambda a: " ".join(a[:1] + a[2:]),
)
def test_a_closed_stdout_pipe_ends_quietly_with_status_0(args: list[str], tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "ctxtool", *[a.format(p=PI) for a in args]]
    env = {**os.environ, "CTXTOOL_CACHE_DIR": str(tmp_path / "c")}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first byte (`| head -0`)
    err = proc.stderr.read().decode()
    assert proc.wait(60) == 0, err
    assert "Error" not in err and "Exception ignored" not in err and "internal error" not in err


def test_stats_piped_into_head(tmp_path: Path) -> None:
    script = f'"{sys.executable}" -m ctxtool stats "{PI}" | head -1 >/dev/null; echo "${{PIPESTATUS[0]}}"'
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "CTXTOOL_CACHE_DIR": str(tmp_path / "c")}, check=False)
    assert r.stdout.strip() == "0", r.stderr
    assert r.stderr == ""


def test_a_closed_stdout_is_exit_code_8(tmp_path: Path) -> None:
    script = f'"{sys.executable}" -m ctxtool stats "{PI}" --json >&-'
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "CTXTOOL_CACHE_DIR": str(tmp_path / "c")}, check=False)
    assert r.returncode == 8, r.stderr
    assert r.stderr == "ctxtool: error: <stdout>: cannot write the output: stdout is closed\n"


def test_sweep_removes_only_dead_owners_entries_and_never_follows_links(tmp_path: Path) -> None:
    gone = dead_pid()
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "precious").write_text("x")
    link = tmp_path / f".out.ctxtool-{gone}-abcd1234.tmp"
    link.symlink_to(keep)
    stale = tmp_path / f".out.ctxtool-{gone}-efgh5678.tmp"
    stale.write_text("y")
    live = tmp_path / f".out.ctxtool-{os.getpid()}-ijkl9012.tmp"
    live.write_text("z")
    removed = paths.sweep_leftovers(tmp_path)
    assert sorted(removed) == sorted([str(link), str(stale)])
    assert (keep / "precious").exists() and live.exists()
    assert paths.sweep_leftovers(tmp_path / "missing") == []


def test_the_caches_remove_leftovers_of_dead_owners(tmp_path: Path) -> None:
    """A write killed inside the ref cache (refs/, the manifest) leaves a pid-named temporary;
    the next write there removes it (through the open directory, never a link)."""
    cache = tmp_path / "c"
    r = run_ctxtool("truncate", str(PI), "--max-chars", "40", "-o", str(tmp_path / "a.jsonl"), cache=cache)
    assert r.returncode == 0, r.stderr
    gone = dead_pid()
    refs_left = cache / "refs" / f".{'0' * 24}.ctxtool-{gone}-abc123.tmp"
    manifest_left = cache / f".manifest.jsonl.ctxtool-{gone}-def456.tmp"
    live = cache / "refs" / f".{'1' * 24}.ctxtool-{os.getpid()}-fed987.tmp"
    for p in (refs_left, manifest_left, live):
        p.write_bytes(b"partial")
    r = run_ctxtool("truncate", str(PI), "--max-chars", "50", "-o", str(tmp_path / "b.jsonl"), cache=cache)
    assert r.returncode == 0, r.stderr
    assert not refs_left.exists() and not manifest_left.exists() and live.exists()
    r = run_ctxtool("refs", "verify", cache=cache)
    assert r.returncode == 0, r.stdout + r.stderr
