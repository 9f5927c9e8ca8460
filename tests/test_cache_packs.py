"""Ref packs: the refs a worker of a parallel run writes, many to a file, each still found,
read, listed, verified and collected by its id like a ref file."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from ctxtool import tools_ops
from ctxtool.cache import RefCache
from ctxtool.cache.packs import MAGIC, PACK_MIN
from ctxtool.errors import CtxtoolError, ExitCode
from ctxtool.toolout import PRESETS


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
    assert e.value.code == ExitCode.NOT_FOUND
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


def test_a_parallel_truncate_writes_packs_and_restore_gives_the_input_back(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    with src.open("w") as fh:
        for k in range(120):
            out = "".join(f"record {k}: row {i} of the listing\n" for i in range(400))
            rec = {"id": f"r{k}", "messages": [
                {"role": "user", "content": "list it"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": f"c{k}", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": f"c{k}", "content": out},
            ]}
            fh.write(json.dumps(rec) + "\n")
    cache = tmp_path / "cache"
    short, back = tmp_path / "short.jsonl", tmp_path / "back.jsonl"
    rep = tools_ops.truncate_file(str(src), str(short), limits=PRESETS["seed004"], cache=cache, jobs=2)
    assert rep.truncated == 120 and rep.refs_written == 240  # an output and a stash each
    assert not list((cache / "refs").iterdir()) and len(list((cache / "packs").iterdir())) == 2
    serial = tmp_path / "serial.jsonl"
    tools_ops.truncate_file(str(src), str(serial), limits=PRESETS["seed004"], cache=tmp_path / "c2", jobs=1)
    assert short.read_bytes() == serial.read_bytes()  # the same output, refs in files or packs
    again = tools_ops.truncate_file(str(src), str(tmp_path / "again.jsonl"), limits=PRESETS["seed004"], cache=cache, jobs=2)
    assert again.refs_written == 0  # found in the packs
    tools_ops.restore_file(str(short), str(back), cache=cache, jobs=2)
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
    assert e.value.code == ExitCode.INPUT
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
