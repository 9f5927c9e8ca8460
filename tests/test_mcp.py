"""`ctxtool mcp` through a real MCP client: the SDK's stdio client starts the server as a
subprocess, lists its tools, and reads and greps refs that `truncate` made, compared with what
`refs show` and `refs grep` print; hostile ids and patterns; a 200 MB output paged in flat
memory (the server's peak RSS, from /proc); a client that goes away in the middle of a call."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CORPUS, SAMPLES
from tests.io_pipes import run_ctxtool

pytest.importorskip("mcp")

import anyio  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

pytestmark = pytest.mark.xdist_group("mcp")  # the 200 MB cache is made once per worker


def params(cache: Path, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "ctxtool", "mcp", "--cache-dir", str(cache), *extra],
        env={"PYTHONPATH": os.environ.get("PYTHONPATH", ""), "CTXTOOL_CONFIG": os.devnull},
    )


def session(cache: Path, body: Callable[[Any], Awaitable[Any]], *extra: str) -> Any:
    """Run ``body(client)`` against a fresh ``ctxtool mcp`` over stdio; its result."""

    async def main() -> Any:
        async with Client(params(cache, *extra)) as client:
            return await body(client)

    return anyio.run(main)


def text(res: Any) -> str:
    return "".join(c.text for c in res.content)


def ok(res: Any) -> str:
    assert not res.is_error, text(res)
    return text(res)


def truncated_cache(tmp_path: Path, transcript: Path) -> Path:
    cache = tmp_path / "cache"
    r = run_ctxtool("truncate", str(transcript), "-o", str(tmp_path / "short.jsonl"), "--preset", "seed004",
                    "--max-bytes", "2000", cache=cache)
    assert r.returncode == 0, r.stderr
    return cache


def refs_of(cache: Path) -> list[dict[str, Any]]:
    r = run_ctxtool("refs", "ls", "--json", cache=cache)
    assert r.returncode == 0, r.stderr
    return [x for x in json.loads(r.stdout)["refs"] if x["kind"] == "output"]


def cli_show(cache: Path, ref: str, offset: int, limit: int) -> dict[str, Any]:
    r = run_ctxtool("refs", "show", ref, "--offset", str(offset), "--limit", str(limit), "--json", cache=cache)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)  # type: ignore[no-any-return]


SOURCES = [pytest.param(SAMPLES / "claude_code_session.jsonl", id="samples/claude_code_session.jsonl"),
           pytest.param(CORPUS / "claude_code" / "codemie_session-624a4a58.jsonl", id="corpus/claude_code"),
           pytest.param(CORPUS / "codex" / "codemie_rollout-2026-05-11T11-26-55-019e1625.jsonl", id="corpus/codex")]

PAGE = re.compile(r"^ *(\d+)\t(.*)$")


def page_lines(out: str) -> list[tuple[int, str]]:
    """The numbered lines of a tool_output_cache result (the notes after them left out)."""
    body = out[: out.index("\n[")] if "\n[" in out else ("" if out.startswith("[") else out)
    return [(int(m.group(1)), m.group(2)) for m in map(PAGE.match, body.split("\n")) if m]


@pytest.mark.parametrize("src", SOURCES)
def test_pages_and_grep_match_refs_show_and_refs_grep(tmp_path: Path, src: Path) -> None:
    if not src.is_file():
        pytest.skip(f"{src} not present")
    cache = truncated_cache(tmp_path, src)
    refs = refs_of(cache)
    if not refs:
        pytest.skip(f"truncate cut nothing in {src.name}")
    ref = max(refs, key=lambda x: x["line_count"])
    total = ref["line_count"]
    limit = max(1, total // 3)
    grep = run_ctxtool("refs", "grep", "--all", "-C", "1", "--max-count", "5", "--json", "e", cache=cache)
    assert grep.returncode == 0, grep.stderr
    want_grep = json.loads(grep.stdout)

    async def body(c: Any) -> Any:
        names = [t.name for t in (await c.list_tools()).tools]
        pages = []
        offset = 1
        while offset <= total:
            pages.append((offset, ok(await c.call_tool("tool_output_cache",
                                                       {"ref_id": ref["id"], "offset": offset, "limit": limit}))))
            offset += limit
        g = ok(await c.call_tool("tool_output_cache_grep", {"pattern": "e", "context": 1, "max_matches": 5}))
        return names, pages, g

    names, pages, g = session(cache, body)
    assert names == ["tool_output_cache", "tool_output_cache_grep", "transcript_search"]
    for offset, out in pages:
        want = cli_show(cache, ref["id"], offset, limit)
        got = page_lines(out)
        assert got == [(x["n"], x["text"][:2000]) for x in want["lines"]], offset
        last = got[-1][0]
        if last < total:  # the note names the next page
            assert f"call tool_output_cache with ref_id={ref['id']} offset={last + 1}]" in out
        else:
            assert f"lines {offset:,}-{last:,} of {total:,}: the end of the output" in out
    # the same matches, context lines and order as refs grep prints
    rows = [ln for ln in g.split("\n") if ln and not ln.startswith("[") and ln != "--"]
    assert rows == [f"{m['ref'][:16]}{':' if m['match'] else '-'}{m['line']}{':' if m['match'] else '-'}{m['text'][:2000]}"
                    for m in want_grep["matches"]]
    assert "[5 matches in " in g and "call tool_output_cache_grep again with skip=5]" in g


def test_the_tools_are_listed_read_only_with_their_arguments(tmp_path: Path) -> None:
    cache = tmp_path / "cache"

    async def body(c: Any) -> Any:
        return (await c.list_tools()).tools

    tools = {t.name: t for t in session(cache, body)}
    assert set(tools["tool_output_cache"].input_schema["properties"]) == {"ref_id", "offset", "limit"}
    assert tools["tool_output_cache"].input_schema["required"] == ["ref_id"]
    assert {"pattern", "ref_id", "context", "max_matches"} <= set(tools["tool_output_cache_grep"].input_schema["properties"])
    assert {"query", "paths"} <= set(tools["transcript_search"].input_schema["properties"])
    for t in tools.values():
        assert t.annotations.read_only_hint is True and t.annotations.destructive_hint is False
    assert not cache.exists()  # a server over a cache that is not there makes none


@pytest.fixture
def small(tmp_path: Path) -> tuple[Path, str]:
    from ctxtool.cache import RefCache

    cache = tmp_path / "cache"
    with RefCache(cache) as c:
        ref = c.put("".join(f"line {i}: " + ("é" * 3000 if i == 7 else "ok") + "\n" for i in range(1, 3001))
                    + "x" * 5000 + "\n").id
    return cache, ref


def test_long_lines_cut_and_a_page_capped_at_50_kib(small: tuple[Path, str]) -> None:
    cache, ref = small

    async def body(c: Any) -> Any:
        first = ok(await c.call_tool("tool_output_cache", {"ref_id": ref[:12], "offset": 1, "limit": 100000}))
        n = page_lines(first)[-1][0]
        second = ok(await c.call_tool("tool_output_cache", {"ref_id": ref, "offset": n + 1}))
        return first, second

    first, second = session(cache, body)
    lines = page_lines(first)
    assert lines[6] == (7, "line 7: " + "é" * 1992)  # cut at 2,000 characters
    assert "[1 line(s) longer than 2,000 characters cut; tool_output_cache_grep with ref_id finds text in them]" in first
    assert len(first.encode()) <= 50 * 1024
    n = lines[-1][0]
    assert f"(50 KiB per result); {3001 - n:,} more: call tool_output_cache with ref_id={ref} offset={n + 1}]" in first
    assert page_lines(second)[0] == (n + 1, f"line {n + 1}: ok")
    assert page_lines(second)[-1] == (3001, "x" * 2000)


HOSTILE_IDS = ["../../etc/passwd", "/etc/passwd", "ref=../x", "a" * 63 + "/", "\0", "a" * 64 + "\0", "abc",
               "%2e%2e%2f", "A" * 64 + "/../../../etc/passwd", "x" * 100_000, "ref=" + "0" * 64, "0" * 64]


def test_hostile_ref_ids_are_refused_and_the_server_goes_on(small: tuple[Path, str], tmp_path: Path) -> None:
    cache, ref = small
    # a link planted where a ref belongs, pointing outside the cache: never followed
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET\n")
    planted = "f" * 64
    (cache / "refs" / planted).symlink_to(secret)

    async def body(c: Any) -> Any:
        out = []
        for rid in [*HOSTILE_IDS, planted]:
            out.append(await c.call_tool("tool_output_cache", {"ref_id": rid}))
            out.append(await c.call_tool("tool_output_cache_grep", {"pattern": "SECRET|root", "ref_id": rid}))
        out.append(await c.call_tool("tool_output_cache", {"ref_id": ref, "limit": 1}))
        return out

    *bad, good = session(cache, body)
    for r in bad:
        assert r.is_error, text(r)
        assert "SECRET" not in text(r).replace("SECRET|root", "") and "root:" not in text(r)
        assert len(text(r)) < 1000  # an id of 100,000 characters is not echoed back
    assert page_lines(ok(good)) == [(1, "line 1: ok")]
    msgs = [text(r) for r in bad]
    assert any("a ref is a sha256 (64 hex digits)" in m for m in msgs)
    assert any("not in the cache" in m for m in msgs)


def test_hostile_patterns_are_error_results(small: tuple[Path, str]) -> None:
    cache, ref = small

    async def body(c: Any) -> Any:
        out = [await c.call_tool("tool_output_cache_grep", {"pattern": p}) for p in ["(", "[a-", "(?P<x", "\\", "x{2,1}"]]
        # nested quantifiers on a line of 5,000 x's: catastrophic backtracking, bounded in time
        out.append(await c.call_tool("tool_output_cache_grep", {"pattern": "(x+x+)+y", "ref_id": ref}))
        out.append(await c.call_tool("tool_output_cache_grep", {"pattern": "line 2999", "ref_id": ref}))
        return out

    *bad, slow, good = session(cache, body)
    for r in bad:
        assert r.is_error and "invalid pattern" in text(r), text(r)
    assert slow.is_error and "catastrophic backtracking" in text(slow), text(slow)
    assert ok(good).startswith(f"{ref[:16]}:2999:line 2999: ok\n")


def test_transcript_search_reads_only_what_it_was_given(tmp_path: Path) -> None:
    from ctxtool import formats

    src = SAMPLES / "claude_code_session.jsonl"
    t = next(formats.read(src))
    # a string from a tool result of the sample
    i, msg = next((i, m) for i, m in enumerate(t.messages) if any(b.type == "tool_result" and len(b.text) > 40
                                                                      for b in m.content))
    needle = next(b.text for b in msg.content if b.type == "tool_result").strip().split("\n")[0][:30]
    root = tmp_path / "sessions"
    root.mkdir()
    (root / "s.jsonl").write_bytes(src.read_bytes())
    (tmp_path / "outside.jsonl").write_bytes(src.read_bytes())

    async def body(c: Any) -> Any:
        return [await c.call_tool("transcript_search", a) for a in (
            {"query": needle},
            {"query": needle, "paths": ["s.jsonl"]},
            {"query": needle, "paths": [str(tmp_path / "outside.jsonl")]},
            {"query": needle, "paths": [str(root / ".." / "outside.jsonl")]},
            {"query": "root", "paths": ["/etc/passwd"]},
        )]

    hits, same, *refused = session(tmp_path / "cache", body, "--transcripts", str(root))
    first = ok(hits).split("\n")[0]
    assert first.startswith(f"{root / 's.jsonl'}:{msg.lineno} message {i} ({msg.role}, tool_result)"), first
    assert ok(same) == ok(hits)
    for r in refused:
        assert r.is_error and "outside the transcript directories" in text(r), text(r)

    async def off(c: Any) -> Any:
        return await c.call_tool("transcript_search", {"query": needle, "paths": [str(src)]})

    r = session(tmp_path / "cache", off)
    assert r.is_error and "start the server with --transcripts" in text(r)


# -- a 200 MB output ---------------------------------------------------------------------------

BIG_LINES = 2_000_000  # lines of 100 bytes: 200 MB


def big_line(i: int) -> bytes:
    """Line ``i`` of the 200 MB output: 100 bytes; every 500,000th holds ERROR."""
    return f"{i:>10} ".encode() + b"abcdefghij" * 8 + (b"ERROR..." if i % 500_000 == 0 else b"........") + b"\n"


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, int]:
    """A cache holding one 200 MB output (2,000,000 lines of 100 bytes)."""
    from ctxtool.cache import RefCache

    data = bytearray()
    for i in range(1, BIG_LINES + 1):
        data += big_line(i)
    cache = tmp_path_factory.mktemp("big") / "cache"
    with RefCache(cache) as c:
        ref = c.put(data).id
    size = len(data)
    del data
    return cache, ref, size


def server_pid() -> int:
    """The ``ctxtool mcp`` child of this process."""
    me = os.getpid()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
                cmd = (d / "cmdline").read_bytes()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == me and b"\0mcp\0" in cmd:
                return int(d.name)
    raise AssertionError("no ctxtool mcp child")


def peak_rss_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1))  # type: ignore[union-attr]


@pytest.mark.slow
def test_a_200_mb_output_paged_in_flat_memory(big: tuple[Path, str, int]) -> None:
    cache, ref, size = big
    assert size == BIG_LINES * 100

    async def body(c: Any) -> Any:
        pid = server_pid()
        missing = await c.call_tool("tool_output_cache", {"ref_id": "0" * 64})
        assert missing.is_error
        before = peak_rss_kib(pid)  # the server with its SDK, having served a call
        pages = []
        for offset in (1, 11, BIG_LINES // 2, BIG_LINES - 5):  # one page, the next, one in the middle, the last
            pages.append(ok(await c.call_tool("tool_output_cache", {"ref_id": ref, "offset": offset, "limit": 10})))
        g = ok(await c.call_tool("tool_output_cache_grep", {"pattern": "ERROR", "ref_id": ref}))
        return pid, before, peak_rss_kib(pid), pages, g

    pid, before, after, pages, g = session(cache, body)
    assert page_lines(pages[0]) == [(i, big_line(i).decode().rstrip("\n")) for i in range(1, 11)]
    assert page_lines(pages[1]) == [(i, big_line(i).decode().rstrip("\n")) for i in range(11, 21)]
    assert page_lines(pages[2])[0] == (BIG_LINES // 2, big_line(BIG_LINES // 2).decode().rstrip("\n"))
    assert page_lines(pages[3])[-1][0] == BIG_LINES and "the end of the output" in pages[3]
    assert f"more: call tool_output_cache with ref_id={ref} offset=21]" in pages[1]
    assert [int(x.split(":")[1]) for x in g.split("\n") if x.startswith(ref[:16])] == [500_000, 1_000_000, 1_500_000, 2_000_000]
    grew = after - before
    print(f"\nctxtool mcp paging a {size / 1e6:.0f} MB output: peak RSS (VmHWM) {before / 1024:.1f} MiB before "
          f"reading it, {after / 1024:.1f} MiB after four pages (first, next, middle, last) and a grep (+{grew / 1024:.1f} MiB)")
    # the control: the same output read whole (RefCache.read_bytes), its peak in a process of its own
    code = ("import resource, sys; from ctxtool.cache import RefCache; "
            "d = RefCache(sys.argv[1]).read_bytes(sys.argv[2]); "
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    whole = int(subprocess.run([sys.executable, "-c", code, str(cache), ref], capture_output=True, text=True,
                               check=True).stdout)
    print(f"control: the output read whole in one process peaks at {whole / 1024:.1f} MiB")
    assert whole > size / 1024  # the measure sees an output held whole
    assert grew < 48 * 1024  # paging did not: a few pieces of ~1 MiB at a time


@pytest.mark.slow
def test_a_client_that_goes_away_mid_call(big: tuple[Path, str, int]) -> None:
    cache, ref, _ = big
    env = {**os.environ, "CTXTOOL_CONFIG": os.devnull}
    p = subprocess.Popen([sys.executable, "-m", "ctxtool", "mcp", "--cache-dir", str(cache)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert p.stdin is not None and p.stdout is not None

    def send(obj: dict[str, Any]) -> None:
        assert p.stdin is not None
        p.stdin.write(json.dumps(obj).encode() + b"\n")
        p.stdin.flush()

    send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}})
    assert json.loads(p.stdout.readline())["id"] == 1
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    # a page of the 200 MB output: the server reads all of it (about a second or more)
    send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
          "params": {"name": "tool_output_cache", "arguments": {"ref_id": ref, "offset": 1_999_000}}})
    p.stdin.close()  # the client goes away before the answer
    p.stdout.close()
    rc = p.wait(timeout=120)
    err = p.stderr.read().decode() if p.stderr else ""
    assert "Traceback" not in err and "internal error" not in err, err
    assert rc == 0, err
    v = run_ctxtool("refs", "verify", cache=cache)  # the cache as it was
    assert v.returncode == 0 and b"checked 1 refs: 1 ok" in v.stdout
