"""The ref cache: content addressing, permissions, validation, verification, show/grep/gc."""

from __future__ import annotations

import hashlib
import os
import stat
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
import zstandard

from ctxtool.cache import RefCache
from ctxtool.cache.content import ZSTD_MAGIC
from ctxtool.errors import CtxtoolError, Failure


@pytest.fixture
def cache(tmp_path: Path) -> RefCache:
    return RefCache(tmp_path / "cache")


def test_put_is_content_addressed_and_private(cache: RefCache) -> None:
    info = cache.put("line one\nline two\n", source={"file": "a.jsonl", "tool": "Bash"})
    assert info.id == hashlib.sha256(b"line one\nline two\n").hexdigest()
    assert info.byte_size == 18 and info.line_count == 2 and info.new
    again = cache.put("line one\nline two\n", source={"file": "b.jsonl"})
    assert again.id == info.id and not again.new
    cache.close()
    assert stat.S_IMODE(os.stat(cache.root).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(cache.refs_dir).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(cache.path_for(info.id)).st_mode) == 0o600
    shards = list((cache.root / "manifest").iterdir())  # one shard per task, never appended to
    assert [p.name for p in shards] == [f"{cache.task}.jsonl"]
    assert stat.S_IMODE(os.stat(shards[0]).st_mode) == 0o600 and not cache.manifest_path.exists()
    man = cache.manifest()
    assert list(man) == [info.id]
    assert [s["file"] for s in man[info.id].sources] == ["a.jsonl", "b.jsonl"]  # duplicates tolerated
    assert cache.read_text(info.id) == "line one\nline two\n"
    assert cache.read_text(info.id[:10]) == "line one\nline two\n"  # unique prefix


def test_refs_are_stored_compressed_and_checked_whole(cache: RefCache) -> None:
    log = "".join(f"2026-11-23 10:{i % 60:02d} INFO request {i} served in 12 ms\n" for i in range(5000))
    info = cache.put(log)
    cache.close()
    stored = cache.path_for(info.id).read_bytes()
    assert stored.startswith(ZSTD_MAGIC)  # one zstd frame
    assert zstandard.ZstdDecompressor().decompress(stored) == log.encode() and len(stored) * 5 < len(log)
    assert info.byte_size == len(log) and cache.manifest()[info.id].byte_size == len(log)  # content sizes
    cache.path_for(info.id).write_bytes(stored[: len(stored) // 2])  # a torn write
    with pytest.raises(CtxtoolError, match="corrupted"):
        cache.read_text(info.id)
    assert cache.verify().corrupted == [info.id]


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda b: b + b"GARBAGE", "bytes after the end of its compressed stream"),
        (lambda b: b + b, "bytes after the end of its compressed stream"),  # a second whole stream
        (lambda b: b[:-4], "its compressed stream is cut short"),
        (lambda b: b[:6], "its compressed stream is cut short"),
        (lambda b: b"", "its compressed stream is cut short"),
    ],
    ids=["garbage", "twice", "cut", "header-only", "empty"],
)
@pytest.mark.parametrize("codec", ["zstd", "zlib"])
def test_verify_names_each_damage_of_either_codec(
    cache: RefCache, codec: str, damage: Callable[[bytes], bytes], problem: str
) -> None:
    text = "".join(f"line {i}\n" for i in range(2000))
    info = cache.put(text)
    cache.close()
    p = cache.path_for(info.id)
    if codec == "zlib":  # a ref as older versions wrote it
        p.write_bytes(zlib.compress(text.encode(), 1))
        assert cache.read_text(info.id) == text and cache.verify().clean
    p.write_bytes(damage(p.read_bytes()))
    with pytest.raises(CtxtoolError, match="corrupted"):
        cache.read_text(info.id)
    v = cache.verify()
    assert v.corrupted == [info.id] and v.problems[info.id] == problem


@pytest.mark.parametrize("codec", ["zstd", "zlib"])
def test_wrong_content_in_a_valid_stream_is_caught(cache: RefCache, codec: str) -> None:
    info = cache.put("the real output\n")
    cache.close()
    fake = b"another output\n"
    stream = zstandard.ZstdCompressor().compress(fake) if codec == "zstd" else zlib.compress(fake)
    cache.path_for(info.id).write_bytes(stream)
    v = cache.verify()
    assert v.corrupted == [info.id] and v.problems[info.id] == "its content does not match its sha256"


def test_refs_of_older_versions_zlib_are_read_shown_grepped_and_collected(cache: RefCache) -> None:
    """Refs written by older versions (one zlib stream each) stay readable beside new ones."""
    old_text = "".join(f"old row {i}\n" for i in range(1, 21))
    old = hashlib.sha256(old_text.encode()).hexdigest()
    new = cache.put("new row\n").id
    cache.close()
    cache.path_for(old).write_bytes(zlib.compress(old_text.encode(), 1))
    assert cache.read_text(old) == old_text and cache.read_text(old[:12]) == old_text
    assert cache.show(old, offset=20, limit=5).lines == [(20, "old row 20")]
    assert [m.line for m in cache.grep("row 7", [old]).matches] == [7]
    v = cache.verify()
    assert v.clean and v.ok == 2 and v.unlisted == [old]
    res = cache.gc([new], dry_run=False)
    assert [r.id for r in res.deleted] == [old] and not cache.path_for(old).exists()
    assert cache.read_text(new) == "new row\n"


@pytest.mark.parametrize(
    "bad",
    ["../../etc/passwd", "/etc/passwd", "abc", "g" * 64, "A" * 63 + "/", "..", "refs/" + "a" * 64, "a" * 64 + "/../x"],
)
def test_refs_refuse_traversal(cache: RefCache, bad: str) -> None:
    with pytest.raises(CtxtoolError) as e:
        cache.read_bytes(bad)
    assert e.value.kind == Failure.INPUT  # a bad ref id is bad input
    with pytest.raises(CtxtoolError):
        cache.path_for(bad)


def test_missing_ref(cache: RefCache) -> None:
    with pytest.raises(CtxtoolError) as e:
        cache.read_bytes("0" * 64)
    assert e.value.kind == Failure.NOT_FOUND


def test_corrupted_ref_is_refused(cache: RefCache) -> None:
    info = cache.put("precious output\n")
    cache.path_for(info.id).write_bytes(b"tampered\n")
    with pytest.raises(CtxtoolError) as e:
        cache.read_text(info.id)
    assert "corrupted" in str(e.value) and e.value.kind == Failure.INPUT
    v = cache.verify()
    assert v.corrupted == [info.id] and not v.clean


def test_verify_missing_unlisted_stray(cache: RefCache) -> None:
    a = cache.put("a\n")
    b = cache.put("b\n")
    cache.path_for(a.id).unlink()
    extra = b"unlisted\n"
    (cache.refs_dir / hashlib.sha256(extra).hexdigest()).write_bytes(zlib.compress(extra))
    (cache.refs_dir / "junk.txt").write_text("x")
    v = cache.verify()
    assert v.missing == [a.id] and v.ok == 2 and v.stray == ["junk.txt"]
    assert v.unlisted == [hashlib.sha256(extra).hexdigest()]
    assert b.id not in v.corrupted
    assert {r.id: r.present for r in cache.list_refs()}[a.id] is False


def test_show_like_a_file_reader(cache: RefCache) -> None:
    info = cache.put("".join(f"row {i}\n" for i in range(1, 11)))
    res = cache.show(info.id, offset=3, limit=2)
    assert res.lines == [(3, "row 3"), (4, "row 4")] and res.total_lines == 10
    assert res.render() == "     3\trow 3\n     4\trow 4\n"
    assert cache.show(info.id, offset=9, limit=None).lines == [(9, "row 9"), (10, "row 10")]
    assert cache.show(info.id, offset=50).lines == []
    with pytest.raises(CtxtoolError):
        cache.show(info.id, offset=0)


def test_grep_one_and_all(cache: RefCache) -> None:
    a = cache.put("alpha\nbeta\nERROR one\ngamma\ndelta\n")
    b = cache.put("error two\nok\n")
    res = cache.grep("error", [a.id], context=1, ignore_case=True)
    assert [(m.line, m.match) for m in res.matches] == [(2, False), (3, True), (4, False)]
    assert res.match_count == 1
    allres = cache.grep("error", None, ignore_case=True)
    assert allres.refs_searched == 2 and allres.match_count == 2
    assert {m.ref for m in allres.matches} == {a.id, b.id}
    assert cache.grep("(", [a.id], fixed=True).match_count == 0
    with pytest.raises(CtxtoolError):
        cache.grep("(", [a.id])


def test_gc_keeps_referenced_and_stash_closure(cache: RefCache) -> None:
    keep = cache.put("kept output\n")
    inner = cache.put("older output\n")
    stash = cache.put_json({"ctxtool_stash": 1, "lines": [{"raw": f'{{"ref":"{inner.id}"}}'}]})
    doomed = cache.put("orphan\n")
    res = cache.gc({keep.id, stash.id}, dry_run=True)
    assert [r.id for r in res.deleted] == [doomed.id] and res.dry_run
    assert cache.exists(doomed.id)
    res = cache.gc({keep.id, stash.id}, dry_run=False)
    assert not cache.exists(doomed.id) and cache.exists(inner.id) and cache.exists(keep.id)
    assert doomed.id not in cache.manifest()
    assert res.kept == 3


def test_gc_follows_refs_inside_a_stash_pack(cache: RefCache) -> None:
    inner = cache.put("older output\n")
    pack = cache.put_json({"ctxtool_stash_pack": 1, "stashes": [{"ctxtool_stash": 1, "refs": [inner.id]}]})
    doomed = cache.put("orphan\n")
    res = cache.gc({pack.id}, dry_run=False)
    assert [r.id for r in res.deleted] == [doomed.id] and cache.exists(inner.id)


def test_a_source_ref_into_a_pack_resolves_to_the_pack(cache: RefCache) -> None:
    info = cache.put_json({"ctxtool_stash_pack": 1, "stashes": [{}, {}]})
    assert cache.resolve(f"{info.id}#1") == info.id
    assert cache.resolve(f"ref={info.id[:12]}#0") == info.id
    with pytest.raises(CtxtoolError, match="invalid ref"):
        cache.resolve("../x#1")


def test_list_refs_in_a_stable_order_whatever_the_shards_order(tmp_path: Path) -> None:
    """Each task of a run writes its own manifest shard, named when it starts, so two workers'
    shards can sort either way from one run to the next: the listing (refs ls, gc, grep) is
    ordered by where each ref came from, then by id (never by the shards' names)."""
    root = tmp_path / "c"
    late, early = RefCache(root), RefCache(root)  # two tasks of one run
    late.put("z\n", source={"file": "b.jsonl", "line": 1, "tool": "Read"})
    early.put("y\n", source={"file": "a.jsonl", "line": 7, "tool": "Bash"})
    early.put("w\n", source={"file": "a.jsonl", "line": 7})  # line 7 twice: by id (y's is the smaller)
    late.put("v\n", source={"file": "b.jsonl"})  # a whole message's source, no line: after b.jsonl's lines
    early.put("x\n", source={"file": "a.jsonl", "line": 2})
    late.put("x\n", source={"file": "a.jsonl", "line": 2})  # the same content seen by both tasks
    late.flush()
    early.flush()
    extra = b"unlisted\n"
    (root / "refs" / hashlib.sha256(extra).hexdigest()).write_bytes(zlib.compress(extra))

    def listing() -> list[tuple[str, list[dict[str, object]]]]:
        return [(r.id, r.sources) for r in RefCache(root).list_refs()]

    first = listing()
    shards = sorted((root / "manifest").iterdir())
    assert len(shards) == 2
    tmp = shards[0].with_name("swap.tmp")
    shards[0].rename(tmp)
    shards[1].rename(shards[0])
    tmp.rename(shards[1])  # the shards' names swapped: read in the other order
    assert listing() == first
    ids = {hashlib.sha256(t).hexdigest(): t for t in (b"v\n", b"w\n", b"x\n", b"y\n", b"z\n", extra)}
    assert hashlib.sha256(b"y\n").hexdigest() < hashlib.sha256(b"w\n").hexdigest()
    assert [ids[i] for i, _ in first] == [b"x\n", b"y\n", b"w\n", b"z\n", b"v\n", extra]
    assert first[0][1] == [{"file": "a.jsonl", "line": 2}]
