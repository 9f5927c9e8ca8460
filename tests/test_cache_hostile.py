"""The caches under attack (issue 10, item 7): links and odd files planted inside the ref
cache and the summary cache are never followed, and each ends as one line naming the path.

Every test builds its hostile layout in a tmp_path cache and checks that what lies outside
(a file, a directory) keeps its content and its mode.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import threading
import zlib
from pathlib import Path
from typing import Any

import pytest

from ctxtool.cache import RefCache
from ctxtool.cache.ids import BadRefError, check_ref
from ctxtool.cli import main
from ctxtool.cli.exits import ExitCode
from ctxtool.errors import CtxtoolError, Failure
from ctxtool.summarizers import SummaryRequest
from ctxtool.summarizers.cache import CachedSummarizer

BIG = "".join(f"build step {i}: compiling module_{i}.c\n" for i in range(4000))


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("CTXTOOL_CACHE_DIR", str(cache))
    monkeypatch.chdir(tmp_path)
    return cache


@pytest.fixture
def chat(tmp_path: Path) -> Path:
    rows = [
        {"role": "user", "content": "build it"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": BIG},
        {"role": "assistant", "content": "done"},
    ]
    p = tmp_path / "chat.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return p


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory outside the cache holding a file; both must stay as they are."""
    d = tmp_path / "outside"
    d.mkdir(mode=0o755)
    os.chmod(d, 0o755)
    (d / "precious.txt").write_text("do not touch\n")
    os.chmod(d / "precious.txt", 0o644)
    return d


def snapshot(d: Path) -> dict[str, Any]:
    out: dict[str, Any] = {".": stat.S_IMODE(d.stat().st_mode)}
    for p in sorted(d.rglob("*")):
        out[str(p.relative_to(d))] = (stat.S_IMODE(p.lstat().st_mode), p.read_bytes() if p.is_file() else None)
    return out


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def one_line_error(err: str, *names: str) -> None:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err and "internal error" not in err
    for n in names:
        assert n in lines[0], (n, lines[0])


def truncate(capsys: pytest.CaptureFixture[str], chat: Path, tmp_path: Path) -> tuple[int, str, str]:
    return cli(capsys, "truncate", str(chat), "-o", str(tmp_path / "short.jsonl"), "--preset", "head-tail")


# -- the ref cache ---------------------------------------------------------------------------


def test_a_manifest_link_is_not_written_through(
    env: Path, chat: Path, outside: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env.mkdir(mode=0o700)
    (env / "manifest").symlink_to(outside, target_is_directory=True)  # where the shards go
    (env / "manifest.jsonl").symlink_to(outside / "precious.txt")  # the old single manifest
    before = snapshot(outside)
    code, _, err = truncate(capsys, chat, tmp_path)
    assert code == ExitCode.INPUT
    one_line_error(err, str(env / "manifest"), "symbolic link")
    assert snapshot(outside) == before
    assert not (tmp_path / "short.jsonl").exists()
    (env / "manifest").unlink()
    code, _, err = cli(capsys, "refs", "ls")
    assert code == ExitCode.INPUT
    one_line_error(err, str(env / "manifest.jsonl"), "symbolic link")
    assert snapshot(outside) == before


def test_a_refs_link_is_not_written_through_or_chmodded(
    env: Path, chat: Path, outside: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env.mkdir(mode=0o700)
    (env / "refs").symlink_to(outside, target_is_directory=True)
    before = snapshot(outside)
    code, _, err = truncate(capsys, chat, tmp_path)
    assert code == ExitCode.INPUT
    one_line_error(err, str(env / "refs"), "symbolic link")
    assert snapshot(outside) == before  # no ref written there, still 0755
    for args in (["refs", "ls"], ["refs", "verify"], ["refs", "show", "a" * 64]):
        code, _, err = cli(capsys, *args)
        assert code == ExitCode.INPUT, args
        one_line_error(err, str(env / "refs"))
    assert snapshot(outside) == before


def test_a_ref_link_is_not_served(
    env: Path, chat: Path, outside: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = outside / "precious.txt"
    secret.write_bytes(zlib.compress(b"secret\n"))  # even a valid stream is never read through a link
    ref = hashlib.sha256(b"secret\n").hexdigest()
    (env / "refs").mkdir(parents=True, mode=0o700)
    (env / "refs" / ref).symlink_to(secret)
    before = snapshot(outside)
    code, out, err = cli(capsys, "refs", "show", ref)
    assert code == ExitCode.INPUT and "secret" not in out
    one_line_error(err, str(env / "refs" / ref), "symbolic link")
    code, out, _ = cli(capsys, "refs", "verify", "--json")
    res = json.loads(out)
    assert code == ExitCode.INVALID and res["corrupted"] == [ref] and "symbolic link" in res["problems"][ref]
    # a put of that very content replaces the link by a real ref; the target is untouched
    with RefCache(env) as c:
        assert c.put(b"secret\n").new
    assert (env / "refs" / ref).is_file() and not (env / "refs" / ref).is_symlink()
    assert snapshot(outside) == before
    assert cli(capsys, "refs", "show", ref)[1] == "     1\tsecret\n"


def unblock_later(*fifos: Path, after: float = 5.0) -> threading.Timer:
    """Should an open block on a FIFO (the bug), open its other end so the test fails, not hangs."""

    def poke() -> None:
        for f in fifos:
            with contextlib.suppress(OSError):
                os.close(os.open(f, os.O_RDWR | os.O_NONBLOCK))

    t = threading.Timer(after, poke)
    t.daemon = True
    t.start()
    return t


def test_fifos_and_hard_links_are_refused_without_blocking(
    env: Path, chat: Path, outside: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ref = "b" * 64
    (env / "refs").mkdir(parents=True, mode=0o700)
    os.mkfifo(env / "refs" / ref)
    guard = unblock_later(env / "refs" / ref, env / "manifest.jsonl")
    code, _, err = cli(capsys, "refs", "show", ref)
    assert code == ExitCode.INPUT
    one_line_error(err, str(env / "refs" / ref), "FIFO")
    os.mkfifo(env / "manifest.jsonl")
    code, _, err = cli(capsys, "refs", "ls")
    assert code == ExitCode.INPUT
    one_line_error(err, str(env / "manifest.jsonl"), "FIFO")
    os.unlink(env / "manifest.jsonl")
    os.link(outside / "precious.txt", env / "manifest.jsonl")  # a hard link: never written to
    before = snapshot(outside)
    code, _, err = truncate(capsys, chat, tmp_path)
    assert code == 0, err
    assert snapshot(outside) == before
    assert guard.is_alive(), "an open blocked on a FIFO"
    guard.cancel()


def test_verify_uses_the_same_check_as_show(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with RefCache(env) as c:
        good = c.put("fine\n").id
        padded = c.put("seven garbage bytes follow\n").id
        gone = c.put("a directory takes its place\n").id
    with (env / "refs" / padded).open("ab") as f:
        f.write(b"GARBAGE")
    (env / "refs" / gone).unlink()
    (env / "refs" / gone).mkdir()
    code, _, err = cli(capsys, "refs", "show", padded)
    assert code == ExitCode.INPUT and "corrupted" in err
    code, out, err = cli(capsys, "refs", "verify")
    assert code == ExitCode.INVALID and "internal error" not in err
    assert f"CORRUPTED {padded} (bytes after the end of its compressed stream)" in out
    assert f"CORRUPTED {gone} (is a directory, not a regular file)" in out
    assert "checked 3 refs: 1 ok" in out and good not in out
    code, _, err = cli(capsys, "refs", "show", gone)
    assert code == ExitCode.INPUT
    one_line_error(err, str(env / "refs" / gone), "directory")
    with RefCache(env) as c, pytest.raises(CtxtoolError, match="directory"):
        c.put("a directory takes its place\n")


def test_gc_counts_disk_bytes_never_minus_one(env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with RefCache(env) as c:
        c.put("orphan\n")
    unlisted = env / "refs" / ("c" * 64)
    unlisted.write_bytes(b"not even zlib")  # a damaged ref nobody listed
    keep = tmp_path / "empty.jsonl"
    keep.write_text(json.dumps({"role": "user", "content": "hi"}) + "\n")
    files = sorted((env / "refs").iterdir())
    disk = sum(p.stat().st_size for p in files)
    code, out, err = cli(capsys, "refs", "gc", str(keep))
    assert code == 0 and "-1" not in out + err
    assert f"would delete 2 ref(s), {disk:,} bytes on disk" in err
    code, out, _ = cli(capsys, "refs", "gc", str(keep), "--yes", "--json")
    res = json.loads(out)
    assert code == 0 and res["bytes_freed"] == disk and res["deleted_count"] == 2
    assert list((env / "refs").iterdir()) == []


def test_a_bad_ref_id_is_bad_input(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "refs", "show", "../../etc/passwd")
    assert code == ExitCode.INPUT
    one_line_error(err, "invalid ref")
    ok = "d" * 64
    assert check_ref(ok) == ok and check_ref(ok + "#3", source=True) == ok + "#3"
    for bad, shown in ((12, "a JSON number"), (None, "a JSON null"), ([ok], "a JSON array"), ("../x", "'../x'")):
        with pytest.raises(BadRefError) as e:
            check_ref(bad, what="output_ref.id", path="t.jsonl", line=7)
        assert e.value.kind == Failure.INPUT
        assert str(e.value) == f"t.jsonl:7: invalid output_ref.id {shown}: a ref id is a sha256 (64 hex digits)"
    with pytest.raises(BadRefError):
        check_ref(ok + "#3")  # only a source_ref names a stash of a pack
    with RefCache(env) as c, pytest.raises(BadRefError) as e2:
        c.read_text("not-a-ref")
    located = e2.value.at("t.jsonl", 9)  # how restore names where the ref was read
    assert str(located).startswith("t.jsonl:9: invalid ref 'not-a-ref'") and located.kind == Failure.INPUT


def test_a_cache_root_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "cache").write_text("not a directory")
    with pytest.raises(CtxtoolError) as e:
        RefCache(tmp_path / "cache").put("x")
    assert e.value.kind == Failure.INPUT and str(tmp_path / "cache") in str(e.value)
    assert (tmp_path / "cache").read_text() == "not a directory"


# -- the summary cache -----------------------------------------------------------------------


class Counting:
    name = "counting"
    context_window = 1000

    def __init__(self) -> None:
        self.calls = 0

    def settings(self) -> dict[str, Any]:
        return {"kind": "counting"}

    def summarize(self, req: SummaryRequest) -> str:
        self.calls += 1
        return f"summary of {req.prompt}"


REQ = SummaryRequest(system="s", prompt="p")


def test_the_summary_cache_root_is_private(tmp_path: Path) -> None:
    root = tmp_path / "new" / "cache"
    c = CachedSummarizer(Counting(), root)
    c.summarize(REQ)
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert stat.S_IMODE((root / "summaries").stat().st_mode) == 0o700
    assert stat.S_IMODE(c.path(REQ).stat().st_mode) == 0o600


def test_summary_cache_links_are_refused_before_the_model_is_asked(tmp_path: Path, outside: Path) -> None:
    root = tmp_path / "cache"
    root.mkdir()
    (root / "summaries").symlink_to(outside, target_is_directory=True)
    before = snapshot(outside)
    inner = Counting()
    c = CachedSummarizer(inner, root)
    with pytest.raises(CtxtoolError) as e:
        c.summarize(REQ)
    assert e.value.kind == Failure.INPUT and str(root / "summaries") in str(e.value)
    assert inner.calls == 0 and snapshot(outside) == before
    (root / "summaries").unlink()
    (root / "summaries").mkdir()
    (root / "summaries" / c.key(REQ)).symlink_to(outside / "precious.txt")
    with pytest.raises(CtxtoolError, match="symbolic link"):
        c.summarize(REQ)
    assert inner.calls == 0 and snapshot(outside) == before
    (root / "summaries" / c.key(REQ)).unlink()
    os.link(outside / "precious.txt", root / "summaries" / c.key(REQ))  # would be served as the summary
    with pytest.raises(CtxtoolError, match="hard links"):
        c.summarize(REQ)
    assert inner.calls == 0 and snapshot(outside) == before


def test_a_full_disk_is_an_io_error_naming_the_ref(tmp_path: Path) -> None:
    """A write the file system refuses (here EFBIG, under a file size limit, as ENOSPC would
    be) ends as one line naming the file, exit 8, in a child process with the limit."""
    import subprocess
    import sys

    code = (
        "import os, resource, signal\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))\n"
        "from ctxtool.cache import RefCache\n"
        "from ctxtool.errors import CtxtoolError\n"
        f"c = RefCache({str(tmp_path / 'cache')!r})\n"
        "try:\n"
        "    c.put(os.urandom(50_000))\n"
        "except CtxtoolError as e:\n"
        "    print(e.kind.value, e)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    status, _, msg = r.stdout.strip().partition(" ")
    assert status == "io" and str(tmp_path / "cache" / "refs") in msg and "cannot write" in msg
    assert [p.name for p in (tmp_path / "cache" / "refs").iterdir()] == []  # no temporary left
