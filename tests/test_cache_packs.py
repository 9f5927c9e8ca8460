"""Ref packs: the refs a worker of a parallel run writes, many to a file, each still found,
read, listed, verified and collected by its id like a ref file."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import IO, cast

import pytest
from io_pipes import run_ctxtool

from ctxtool.cache import RefCache
from ctxtool.cache.packs import MAGIC, PACK_MIN
from ctxtool.errors import CtxtoolError, Failure
from ctxtool.io.outputs import HeldOutput
from ctxtool.run import runner
from ctxtool.tool_outputs.algorithms import PRESETS
from ctxtool.tool_outputs.files import TruncateOp, restore_file, truncate_file
from ctxtool.tool_outputs.refs import referenced_refs


def texts(n: int, tag: str = "") -> list[str]:
    return ["".join(f"{tag}output {k} line {i}\n" for i in range(300)) for k in range(n)]


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_a_packing_cache_writes_one_pack_and_reads_every_ref_from_it(tmp_path: Path) -> None:
    root = tmp_path / "c"
    outs = texts(PACK_MIN + 4)
    with RefCache(root, pack=True) as c:
        infos = [c.put(t) for t in outs]
        assert all(i.new for i in infos) and not list((root / "refs").iterdir())  # gathered
        assert c.exists(infos[0].id) and c.read_text(infos[1].id) == outs[1]  # readable before the pack
    assert not list((root / "refs").iterdir())
    packs = sorted((root / "packs").iterdir())
    assert len(packs) == 1 and packs[0].read_bytes().startswith(MAGIC)
    c = RefCache(root)
    assert all(c.exists(sha(t)) and c.read_text(sha(t)) == t for t in outs)
    assert c.read_text(sha(outs[3])[:10]) == outs[3]  # a unique prefix
    assert c.show(sha(outs[2]), offset=300, limit=2).lines == [(300, "output 2 line 299")]
    assert [m.line for m in c.grep("output 5 line 7$").matches] == [8]
    assert not c.put(outs[0]).new  # already stored: in the pack
    refs = {r.id: r for r in c.list_refs()}
    assert set(refs) == {sha(t) for t in outs} and all(r.present and r.stored_bytes > 0 for r in refs.values())
    v = c.verify()
    assert v.clean and v.ok == len(outs) and not v.unlisted
    c.close()


def test_a_few_refs_are_files_and_a_pack_is_never_appended_to(tmp_path: Path) -> None:
    root = tmp_path / "c"
    with RefCache(root, pack=True) as c:
        few = [c.put(t).id for t in texts(3)]
    assert sorted(p.name for p in (root / "refs").iterdir()) == sorted(few)
    assert not (root / "packs").exists() or not list((root / "packs").iterdir())
    with RefCache(root, pack=True) as c:
        c.put("a third run\n")
        for t in texts(PACK_MIN, "more "):
            c.put(t)
    with RefCache(root, pack=True) as c:
        for t in texts(PACK_MIN, "again "):
            c.put(t)
    assert len(list((root / "packs").iterdir())) == 2  # one per task
    assert RefCache(root).verify().ok == 3 + 2 * PACK_MIN + 1


def test_gc_takes_refs_out_of_packs_and_keeps_the_rest_readable(tmp_path: Path) -> None:
    root = tmp_path / "c"
    outs = texts(PACK_MIN * 2)
    with RefCache(root, pack=True) as c:
        for t in outs:
            c.put(t)
    keep = {sha(t) for t in outs[:5]}
    c = RefCache(root)
    res = c.gc(keep, dry_run=False)
    assert len(res.deleted) == len(outs) - 5 and res.bytes_freed > 0
    assert sorted(r.id for r in c.list_refs() if r.present) == sorted(keep)
    assert all(c.read_text(sha(t)) == t for t in outs[:5])
    with pytest.raises(CtxtoolError) as e:
        c.read_text(sha(outs[7]))
    assert e.value.kind == Failure.NOT_FOUND
    assert c.verify().clean
    c.gc(set(), dry_run=False)  # nothing left: the pack goes
    assert not list((root / "packs").iterdir())


def test_verify_finds_a_damaged_entry_and_a_damaged_pack(tmp_path: Path) -> None:
    root = tmp_path / "c"
    outs = texts(PACK_MIN)
    with RefCache(root, pack=True) as c:
        for t in outs:
            c.put(t)
    (pack,) = (root / "packs").iterdir()
    data = bytearray(pack.read_bytes())
    at = data.index(b"\x28\xb5\x2f\xfd", len(MAGIC) + 1)  # the second entry's frame
    data[at + 20] ^= 0xFF
    pack.write_bytes(bytes(data))
    c = RefCache(root)
    v = c.verify()
    assert len(v.corrupted) == 1 and v.ok == len(outs) - 1
    bad = v.corrupted[0]
    with pytest.raises(CtxtoolError, match="corrupted"):
        c.read_text(bad)
    pack.write_bytes(bytes(data[:-5]))  # cut short: its index is gone
    v = RefCache(root).verify()
    assert v.corrupted == [f"packs/{pack.name}"] and "cut short" in v.problems[v.corrupted[0]]
    assert len(v.missing) == len(outs) and not v.clean


def dataset(path: Path, n: int = 120) -> Path:
    """``n`` records, each with one tool output of 400 lines (cut by seed 004's limits)."""
    with path.open("w") as fh:
        for k in range(n):
            out = "".join(f"record {k}: row {i} of the listing\n" for i in range(400))
            rec = {"id": f"r{k}", "messages": [
                {"role": "user", "content": "list it"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": f"c{k}", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": f"c{k}", "content": out},
            ]}
            fh.write(json.dumps(rec) + "\n")
    return path


def test_a_parallel_truncate_writes_packs_and_restore_gives_the_input_back(tmp_path: Path) -> None:
    src = dataset(tmp_path / "in.jsonl")
    cache = tmp_path / "cache"
    short, back = tmp_path / "short.jsonl", tmp_path / "back.jsonl"
    rep = truncate_file(str(src), str(short), limits=PRESETS.get("head-tail"), cache=cache, jobs=2)
    assert rep.truncated == 120 and rep.refs_written == 240  # an output and a stash each
    assert not list((cache / "refs").iterdir()) and len(list((cache / "packs").iterdir())) == 2
    serial = tmp_path / "serial.jsonl"
    truncate_file(str(src), str(serial), limits=PRESETS.get("head-tail"), cache=tmp_path / "c2", jobs=1)
    assert short.read_bytes() == serial.read_bytes()  # the same output, from one process or two
    again = truncate_file(str(src), str(tmp_path / "again.jsonl"), limits=PRESETS.get("head-tail"), cache=cache, jobs=2)
    assert again.refs_written == 0  # found in the packs
    restore_file(str(short), str(back), cache=cache, jobs=2)
    assert back.read_bytes() == src.read_bytes()
    assert RefCache(cache).verify().clean


def test_a_link_in_place_of_packs_is_refused_and_never_followed(tmp_path: Path) -> None:
    root = tmp_path / "c"
    with RefCache(root) as c:
        c.put("one ref\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "packs").symlink_to(outside)
    with RefCache(root, pack=True) as c, pytest.raises(CtxtoolError, match="symbolic link") as e:
        for t in texts(PACK_MIN):
            c.put(t)
    assert e.value.kind == Failure.INPUT
    with pytest.raises(CtxtoolError, match="symbolic link"):
        RefCache(root).verify()
    assert not list(outside.iterdir())


def test_a_task_run_again_under_its_name_never_replaces_its_first_pack(tmp_path: Path) -> None:
    """An engine re-runs a shard under a stable task name: the refs its first run packed are
    found there and not written again, so the second pack must not replace the first."""
    root = tmp_path / "c"
    first = texts(PACK_MIN)
    with RefCache(root, task="shard-0", pack=True) as c:
        for t in first:
            c.put(t)
    with RefCache(root, task="shard-0", pack=True) as c:
        assert not any(c.put(t).new for t in first)
        for t in texts(PACK_MIN, "new "):
            assert c.put(t).new
    c = RefCache(root)
    assert len(list((root / "packs").iterdir())) == 2
    assert all(c.read_text(sha(t)) == t for t in first) and c.verify().clean


def test_packs_on_object_storage_are_read_verified_and_collected() -> None:
    pytest.importorskip("fsspec")
    import uuid

    root = f"memory://packs-{uuid.uuid4().hex}"
    outs = texts(PACK_MIN + 3)
    with RefCache(root, pack=True) as c:
        for t in outs:
            c.put(t)
    c = RefCache(root)
    assert len(c.packs.names()) == 1 and all(c.read_text(sha(t)) == t for t in outs)
    assert c.verify().ok == len(outs)
    res = c.gc({sha(outs[0])}, dry_run=False)
    assert len(res.deleted) == len(outs) - 1 and c.read_text(sha(outs[0])) == outs[0]
    assert c.verify().ok == 1


def test_one_process_writing_a_file_stores_its_refs_in_packs_before_the_file_is_seen(tmp_path: Path) -> None:
    """A file output is renamed into place at the end: its refs are gathered into packs
    (not a file each) and stored before that, so every ref the output names exists by the
    time anything can read it (the check sees the finished output before it replaces anything)."""
    src = dataset(tmp_path / "in.jsonl", 60)
    cache, out = tmp_path / "cache", tmp_path / "short.jsonl"
    seen: list[int] = []

    def check(tmp: str) -> None:
        named = referenced_refs([tmp], "openai")
        c = RefCache(cache)
        assert len(named) == 120 and all(c.exists(r) for r in named)
        seen.append(len(named))

    op = TruncateOp(cache=str(cache), limits=PRESETS.get("head-tail"))
    runner.run_file(op, str(src), str(out), jobs=1, check=check)
    assert seen == [120]
    assert not list((cache / "refs").iterdir()) and len(list((cache / "packs").iterdir())) == 1
    back = tmp_path / "back.jsonl"
    restore_file(str(out), str(back), cache=cache, jobs=1)
    assert back.read_bytes() == src.read_bytes()


def test_one_process_writing_to_stdout_holds_each_chunk_until_its_refs_are_stored(tmp_path: Path) -> None:
    """stdout (or a FIFO) is read while it is written: the output is passed on in chunks,
    each after the refs it names are stored (in packs too); the bytes are the file output's."""
    src = dataset(tmp_path / "in.jsonl", 30)
    cache = tmp_path / "cache"
    r = run_ctxtool("truncate", "--preset", "head-tail", "-j", "1", str(src), cache=cache)
    assert r.returncode == 0, r.stderr
    assert not list((cache / "refs").iterdir()) and len(list((cache / "packs").iterdir())) == 1
    out = tmp_path / "short.jsonl"
    truncate_file(str(src), str(out), limits=PRESETS.get("head-tail"), cache=tmp_path / "c2", jobs=1)
    assert r.stdout == out.read_bytes()


def test_a_held_output_passes_nothing_on_before_what_it_names_is_stored() -> None:
    sink = io.BytesIO()
    stored: list[int] = []  # the bytes passed on when each store ran

    def ready() -> None:
        stored.append(len(sink.getvalue()))

    held = HeldOutput(cast(IO[bytes], sink), ready, limit=10)
    held.write(b"12345")
    assert sink.getvalue() == b"" and stored == []  # held
    held.write(b"678901")  # 11 bytes: stored first, then passed on
    assert stored == [0] and sink.getvalue() == b"12345678901"
    held.write(b"ab")
    held.release()
    assert stored == [0, 11] and sink.getvalue() == b"12345678901ab"


def test_a_reader_of_stdout_finds_every_ref_a_line_names_when_it_reads_the_line(tmp_path: Path) -> None:
    """An output of several chunks (more than HOLD_BYTES), read line by line while the command
    runs: each ref a line names is already in the cache (a pack) when the line arrives."""
    src = tmp_path / "in.jsonl"
    with src.open("w") as fh:
        for k in range(220):  # 30 KB kept per record: about 6.6 MB of output, two chunks or more
            cut = "".join(f"record {k}: row {i} of the listing\n" for i in range(400))
            rec = {"id": f"r{k}", "messages": [
                {"role": "user", "content": f"{k} " + "keep this text " * 2000},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": f"c{k}", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": f"c{k}", "content": cut},
            ]}
            fh.write(json.dumps(rec) + "\n")
    cache = tmp_path / "cache"
    env = {**os.environ, "CTXTOOL_CACHE_DIR": str(cache)}
    env.pop("CTXTOOL_DEBUG", None)
    proc = subprocess.Popen([sys.executable, "-m", "ctxtool", "truncate", "--preset", "head-tail", "-j", "1", str(src)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    lines = named = 0
    try:
        for line in proc.stdout:
            refs = set(re.findall(rb"[0-9a-f]{64}", line))
            c = RefCache(cache)
            assert refs and all(c.exists(r.decode()) for r in refs), f"line {lines + 1} names a ref not stored yet"
            lines += 1
            named += len(refs)
        assert proc.wait(timeout=120) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    assert lines == 220 and named >= 440
    assert len(list((cache / "packs").iterdir())) >= 2  # one per chunk
