"""`make bench`: each figure beside its baseline and its target, measured in one run.

ctxtool is timed as a whole process (``python -m ctxtool ...``: start-up, imports, process
pool, output), the baselines and peers by their loop alone (imports and warm-up outside it).
Each pair runs ``CTXTOOL_BENCH_REPEAT`` times (default 3), the two sides in turn (A B A B ...):
a row shows the median of the ratios taken pair by pair and their spread (lowest-highest),
which the machine's speed drifting between runs does not move as it moves blocks of runs.

The peers (LangChain, litellm) run in the bench-only environment ``.venv-bench``
(``bench/requirements-peers.lock``; ``CTXTOOL_BENCH_PEERS`` names its python), offline:
see bench/peers.py. Without it those rows are skipped with a note.

Since issue 37 the peers' targets are set like against like, in the first two sections:
command against command (ctxtool's whole process against the peer's whole script,
bench/peer_*.py: python's start, its imports, the file read, its result printed) and library
against library (bench/library.py: one process, the same records, each library's functions in
their own loops). The older rows (ctxtool's whole process against a peer's loop alone) stay,
without a target.

Datasets are generated into bench/data/ (gitignored): 20 MB and 200 MB, and 2 GB for the
scaling rows when ``CTXTOOL_BENCH_2GB=1``; with the shared corpus present, a 20 MB set of
real sessions too (bench/gen.py ``from_corpus``), where the peers run again.
``CTXTOOL_BENCH_BIG_PEERS=1`` adds the 200 MB set to the command-against-command rows (the
litellm script alone takes minutes on it); ``CTXTOOL_BENCH_SECTIONS=word,word`` runs only the
sections whose titles hold one of the words.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from bench.common import CTXTOOL, REPEAT, ROOT, peak_rss_mb, ratios_of, run_process, spread, timed
from bench.gen import from_corpus, generate

DATA = ROOT / "bench" / "data"
CORPUS = ROOT.parent / "shared" / "corpus"
BIG = int(os.environ.get("CTXTOOL_BENCH_BYTES", 200_000_000))
BIG_PEERS = os.environ.get("CTXTOOL_BENCH_BIG_PEERS") == "1"  # command against command on the large set too
PEERS_PY = os.environ.get("CTXTOOL_BENCH_PEERS", str(ROOT / ".venv-bench" / "bin" / "python"))
ROWS: list[tuple[str, str, str, str, str]] = []


def row(name: str, measured: str, baseline: str, figure: str, target: str) -> None:
    ROWS.append((name, measured, baseline, figure, target))
    print(f"  {name}: {measured} | baseline {baseline} | {figure} (target {target})", flush=True)


def peer_env() -> dict[str, str]:
    from ctxtool.tokens.bpe import install_bpe_files

    env = dict(os.environ)
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    env["HF_HUB_OFFLINE"] = "1"
    env["TIKTOKEN_CACHE_DIR"] = str(install_bpe_files())  # ctxtool's verified BPE files: no download
    return env


def peers_python(any_python: bool = False) -> str | None:
    """The bench environment's python; without it, this one when ``any_python`` (a baseline
    that needs only orjson and tiktoken), else None."""
    if Path(PEERS_PY).exists():
        return PEERS_PY
    return sys.executable if any_python else None


def peer_times(name: str, path: Path, repeat: int = REPEAT, any_python: bool = False) -> list[float] | None:
    """The peer's loop times (bench/peers.py in the bench environment), None without it."""
    py = peers_python(any_python)
    if py is None:
        return None
    out = subprocess.run([py, str(ROOT / "bench" / "peers.py"), name, str(path), str(repeat)],
                         capture_output=True, text=True, env=peer_env(), check=False)
    if out.returncode:
        print(f"  ({name} failed: {out.stderr.strip().splitlines()[-1:]})", flush=True)
        return None
    times: list[float] = json.loads(out.stdout.strip().splitlines()[-1])["times"]
    return times


def paired(first: Callable[[], float], second: Callable[[], float], repeat: int = REPEAT) -> tuple[list[float], list[float]]:
    """``repeat`` runs of each, in turn (first, second, first, second ...): the times of a
    pair were taken under the same conditions."""
    a: list[float] = []
    b: list[float] = []
    for _ in range(repeat):
        a.append(first())
        b.append(second())
    return a, b


def peer_once(name: str, path: Path, any_python: bool = False) -> float:
    """One run of a peer's loop (its own process: imports and warm-up outside the time);
    a peer that fails here, having run before, ends the bench rather than read as 0 s."""
    times = peer_times(name, path, repeat=1, any_python=any_python)
    if not times:
        raise RuntimeError(f"the peer {name} failed on {path}")
    return times[0]


def whole_once(name: str, path: Path) -> float:
    """One run of a baseline script as a whole process (see :func:`peer_whole`)."""
    return peer_whole(name, path, repeat=1, warm=False)[0][0]


def versus(name: str, ours_args: Sequence[str], peer: str, path: Path, label: str, target: str) -> float | None:
    """One row: ctxtool's whole process against a peer's loop on ``path`` (how many times
    faster ctxtool is), the two run in turn. Returns the peer's median loop time; None when
    the peer is not installed."""
    if peer_times(peer, path, repeat=1) is None:  # also warms the page cache
        row(name, "-", f"{label}: not installed (make bench creates .venv-bench)", "-", target)
        return None
    run_process([*CTXTOOL, *ours_args])  # warm
    peer_t, ours = paired(lambda: peer_once(peer, path),
                          lambda: run_process([*CTXTOOL, *ours_args]))
    ratios = ratios_of(peer_t, ours)
    mb = path.stat().st_size / 1e6
    row(name, f"{statistics.median(ours):.2f} s ({mb / statistics.median(ours):.0f} MB/s)",
        f"{label} {statistics.median(peer_t):.2f} s", spread(ratios), target)
    return statistics.median(peer_t)


def peer_whole(name: str, path: Path, repeat: int = REPEAT, warm: bool = True) -> tuple[list[float], int]:
    """A baseline script (bench/peers.py NAME FILE whole) timed as a whole process, like
    ctxtool: python's start, its imports, the loop once. Its result is returned too."""
    args = [peers_python(any_python=True) or sys.executable, str(ROOT / "bench" / "peers.py"), name, str(path), "whole"]
    env = peer_env()
    result = -1  # not run untimed (``warm`` False): no result
    if warm:
        out = subprocess.run(args, capture_output=True, text=True, env=env, check=True)  # warm the page cache
        result = json.loads(out.stdout)["result"]
    return [run_process(args, env=env) for _ in range(repeat)], result


def floor_times(name: str, path: Path, repeat: int = REPEAT, warm: bool = True) -> list[float]:
    """A floor of bench/floors.py (``truncate``, ``truncate_write``, ``tokens``) timed as a whole process
    (``warm``: run once untimed first, for the page cache)."""
    args = [sys.executable, "-m", "bench.floors", name, str(path)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if warm:
        run_process(args, env=env)
    return [run_process(args, env=env) for _ in range(repeat)]


def ctxtool_json(args: Sequence[str]) -> dict[str, Any]:
    out = subprocess.run([*CTXTOOL, *args, "--json"], capture_output=True, text=True, check=True)
    data: dict[str, Any] = json.loads(out.stdout)
    return data


def bench_stats_vs_parse(big: Path) -> None:
    """stats (heuristic) against the parse limit: a plain orjson loop over the same file, both
    whole processes (the issue's measure), then the loop alone against stats in-process."""
    peer_whole("orjson_loop", big, repeat=0)  # warm
    run_process([*CTXTOOL, "stats", str(big)])
    whole, ours = paired(lambda: whole_once("orjson_loop", big),
                         lambda: run_process([*CTXTOOL, "stats", str(big)]))
    ratios = ratios_of(whole, ours)
    mb = big.stat().st_size / 1e6
    row(f"stats --tokenizer heuristic, {mb:.0f} MB (whole processes)",
        f"{statistics.median(ours):.2f} s ({mb / statistics.median(ours):.0f} MB/s)",
        f"orjson loop script {statistics.median(whole):.2f} s", spread(ratios) + " of the loop's speed", ">= 0.70x")
    from ctxtool.stats import files as stats

    base, inproc = paired(lambda: peer_once("orjson_loop", big, any_python=True),
                          in_process(lambda: stats.stats_files([str(big)])))
    ratios = ratios_of(base, inproc)
    row(f"  the same, loop alone vs in-process, {mb:.0f} MB", f"{statistics.median(inproc):.2f} s",
        f"orjson loop {statistics.median(base):.2f} s", spread(ratios) + " of the loop's speed", "(no target)")


def bench_stats_tiktoken(path: Path) -> None:
    """stats --tokenizer o200k_base against one tiktoken thread over the same texts: a script
    that loads the encoding, parses each record and encodes its texts, both whole processes
    (the issue's measure); then the loop alone against stats in-process. The script's total
    must equal ctxtool's (same texts, same counts)."""
    from ctxtool.stats import files as stats

    _, total = peer_whole("tiktoken_loop", path, repeat=0)
    same = ctxtool_json(["stats", "--tokenizer", "o200k_base", str(path)])["totals"]["tokens"] == total
    whole, ours = paired(lambda: whole_once("tiktoken_loop", path),
                         lambda: run_process([*CTXTOOL, "stats", "--tokenizer", "o200k_base", str(path)]))
    ratios = ratios_of(whole, ours)
    mb = path.stat().st_size / 1e6
    row(f"stats --tokenizer o200k_base, {mb:.0f} MB ({os.cpu_count()} cores, whole processes)",
        f"{statistics.median(ours):.2f} s ({total:,} tokens, same as the script: {same})",
        f"1-thread tiktoken script {statistics.median(whole):.2f} s", spread(ratios), ">= 1.60x")
    if peer_times("tiktoken_loop", path, repeat=1, any_python=True):
        base, inproc = paired(lambda: peer_once("tiktoken_loop", path, any_python=True),
                              in_process(lambda: stats.stats_files([str(path)], tokenizer="o200k_base")))
        ratios = ratios_of(base, inproc)
        row(f"  the same, loop alone vs in-process (encoding loaded), {mb:.0f} MB", f"{statistics.median(inproc):.2f} s",
            f"1-thread tiktoken loop {statistics.median(base):.2f} s", spread(ratios), "(no target)")


def in_process(fn: Callable[[], object]) -> Callable[[], float]:
    """``fn`` run once here (warm), then a function that times one more run of it."""
    fn()
    return lambda: timed(fn)


def bench_peers(small: Path, label: str = "") -> None:
    """ctxtool's whole process against each peer's loop alone (issue 16's measure: no target
    since issue 37, whose rows are :func:`bench_commands` and :func:`bench_library`). The first rows are the floors of that measure: a whole python process that
    only parses the file (the orjson loop script) against the count_tokens_approximately
    loop: no tool in a python process can be faster than its own parse; and one that only
    parses and counts exactly (bench/floors.py tokens) against litellm's loop."""
    on = f" [{label}]" if label else ""
    if peer_times("lc_count", small, repeat=1) is not None:
        peer_whole("orjson_loop", small, repeat=0)  # warm
        lc, floor = paired(lambda: peer_once("lc_count", small),
                           lambda: whole_once("orjson_loop", small))
        ratios = ratios_of(lc, floor)
        row(f"floor: orjson loop script (parse only, whole process) vs count_tokens_approximately loop{on}",
            f"{statistics.median(floor):.2f} s", f"count_tokens_approximately loop {statistics.median(lc):.2f} s",
            spread(ratios), "(the best any whole process can reach)")
    if peer_times("litellm_count", small, repeat=1) is not None:
        floor_times("tokens", small, repeat=0)  # warm
        lite, floor = paired(lambda: peer_once("litellm_count", small),
                             lambda: floor_times("tokens", small, repeat=1, warm=False)[0])
        ratios = ratios_of(lite, floor)
        row(f"floor: the exact count alone (bench/floors.py tokens: parse, o200k_base, one process per core, whole "
            f"process) vs token_counter loop{on}", f"{statistics.median(floor):.2f} s",
            f"token_counter loop {statistics.median(lite):.2f} s", spread(ratios), "(the best an exact count can reach)")
    with tempfile.TemporaryDirectory() as d:
        out = str(Path(d) / "w.jsonl")
        for name, ours, peer, what in (
            ("stats vs LangChain count_tokens_approximately", ["stats", str(small)], "lc_count",
             "count_tokens_approximately"),
            ("window --max-chars 32000 vs LangChain trim_messages (last, 8,000 tokens)",
             ["window", "--max-chars", "32000", "--max-messages", "1000000", "-o", out, str(small)], "lc_trim",
             "trim_messages"),
            ("stats --tokenizer o200k_base vs litellm token_counter", ["stats", "--tokenizer", "o200k_base", str(small)],
             "litellm_count", "token_counter"),
        ):
            loop = versus(name + on, ours, peer, small, f"{what} loop", "(none since issue 37: like against like below)")
            if loop is not None:
                # the CLI framework ctxtool must use (typer) costs a process before any work:
                # beside it, the time the old target (2x the loop) left ctxtool's whole process
                budget = loop / 2.0
                typer_s = wall([sys.executable, "-c", "import typer"])
                row(f"  the time 2x the loop would leave ctxtool's whole process{on}", f"{budget * 1000:.0f} ms ({what} loop / 2)",
                    f"python -c 'import typer' {typer_s * 1000:.0f} ms (whole process)",
                    "room left" if budget > typer_s else "less than importing typer: unreachable with typer", "-")


#: command against command: ctxtool's command, the peer's standalone script (bench/peer_*.py,
#: given FILE and, for a script that writes, OUT), what the script runs
COMMANDS: tuple[tuple[str, list[str], str, bool, str], ...] = (
    ("ctxtool stats vs a count_tokens_approximately script", ["stats"], "peer_lc_count.py", False,
     "count_tokens_approximately"),
    ("ctxtool window --max-chars 32000 -o OUT vs a trim_messages script (last 8,000 tokens, -> OUT)",
     ["window", "--max-chars", "32000", "--max-messages", "1000000", "-o", "{out}"], "peer_lc_trim.py", True,
     "trim_messages"),
    ("ctxtool stats --tokenizer o200k_base vs a litellm token_counter script", ["stats", "--tokenizer", "o200k_base"],
     "peer_litellm_count.py", False, "token_counter"),
)


def bench_commands(path: Path, label: str = "") -> None:
    """Command against command (issue 37): ctxtool's whole process (``python -m ctxtool``:
    start-up, imports, its process pool, the report printed) against the peer's whole script
    (python's start, its imports, the same file read record by record, its result printed;
    bench/peer_*.py in .venv-bench), run in turn, the file read once first (the page cache;
    no untimed run: the litellm script takes minutes on 200 MB). The row shows what the
    script printed (the same every run). A script that writes (trim_messages) writes its
    records where ctxtool's window writes its output (a temporary directory)."""
    on = f" [{label}]" if label else ""
    mb = path.stat().st_size / 1e6
    py = peers_python()
    if py is None:
        for name, *_ in COMMANDS:
            row(name + on, "-", "not installed (make bench creates .venv-bench)", "-", ">= 2.00x")
        return
    env = peer_env()
    with path.open("rb") as fh:  # into the page cache
        while fh.read(1 << 24):
            pass
    with tempfile.TemporaryDirectory() as d:
        ours_out, peer_out = str(Path(d) / "ctxtool.jsonl"), str(Path(d) / "peer.jsonl")
        for name, args, script, writes, what in COMMANDS:
            ours = [*CTXTOOL, *(a.format(out=ours_out) for a in args), str(path)]
            peer = [py, str(ROOT / "bench" / script), str(path), *([peer_out] if writes else [])]
            printed: list[str] = []

            def peer_run(p: list[str] = peer, out: list[str] = printed) -> float:
                t = time.perf_counter()
                res = subprocess.run(p, capture_output=True, text=True, env=env, check=True)
                took = time.perf_counter() - t
                out.append(res.stdout.strip())
                return took

            peer_t, mine = paired(peer_run, lambda o=ours: run_process(o))
            if len(set(printed)) != 1:
                raise RuntimeError(f"{script} printed different results: {printed}")
            ratios = ratios_of(peer_t, mine)
            row(f"{name}, {mb:.0f} MB (whole processes){on}",
                f"{statistics.median(mine):.2f} s ({mb / statistics.median(mine):.0f} MB/s)",
                f"{what} script {statistics.median(peer_t):.2f} s (printed {int(printed[0]):,})", spread(ratios), ">= 2.00x")


def bench_library(path: Path, label: str = "") -> None:
    """Library against library (issue 37, bench/library.py): in one process (the peers'
    python, ctxtool's checkout on its path), over the same records, ctxtool's functions
    against the peers' in their own loops, in turn."""
    import sysconfig

    on = f" [{label}]" if label else ""
    py = peers_python()
    if py is None:
        row("library against library" + on, "-", "not installed (make bench creates .venv-bench)", "-", ">= 2.00x")
        return
    env = {**peer_env(), "CTXTOOL_BENCH_SITE": sysconfig.get_path("purelib")}
    out = subprocess.run([py, str(ROOT / "bench" / "library.py"), str(path), str(REPEAT)], capture_output=True,
                         text=True, env=env, check=False)
    if out.returncode:
        row("library against library" + on, "-", f"failed: {out.stderr.strip().splitlines()[-1:]}", "-", ">= 2.00x")
        return
    for line in out.stdout.splitlines():
        r = json.loads(line)
        if "missing" in r:
            row(f"{r['name']}{on} (one process)", "-", f"{r['peer']}: not run ({r['missing']})", "-", ">= 2.00x")
            continue
        if "peer_times" not in r:
            print(f"  ({r['records']:,} records, {r['transcripts']:,} transcripts)", flush=True)
            continue
        ratios = ratios_of(r["peer_times"], r["ours_times"])
        row(f"{r['name']}{on} (one process)", f"{statistics.median(r['ours_times']):.3f} s",
            f"{r['peer']} loop {statistics.median(r['peer_times']):.3f} s", spread(ratios), r.get("target", ">= 2.00x"))


def bench_window_read(path: Path, label: str = "") -> None:
    """window's fast read (a dataset record planned from its tally, only the messages it
    keeps read) against every message read (``fast=False``): in this process, one core, the
    budget of the trim row, output written; interleaved."""
    from ctxtool.history.window import window_file

    on = f" [{label}]" if label else ""
    fast: list[float] = []
    full: list[float] = []
    with tempfile.TemporaryDirectory() as d:
        out = str(Path(d) / "w.jsonl")
        for k in range(REPEAT + 1):  # the first of each warms
            for fast_read, times in ((True, fast), (False, full)):
                t = time.perf_counter()
                window_file(str(path), out, max_chars=32000, max_messages=1_000_000, jobs=1, fast=fast_read)
                if k:
                    times.append(time.perf_counter() - t)
    ratios = ratios_of(full, fast)
    row(f"window --max-chars 32000: fast read vs every message read (in-process, -j 1){on}",
        f"{statistics.median(fast):.3f} s", f"every message read {statistics.median(full):.3f} s",
        spread(ratios) + " faster", "(report)")


def bench_scaling(files: list[Path]) -> None:
    """stats on 20 MB, 200 MB (and 2 GB): time linear in the size, peak memory flat; then
    truncate's peak memory on the same files (one run each, writing to /dev/shm where it is)."""
    first: tuple[float, float, float] | None = None
    bench_truncate_memory(files)
    for p in files:
        mb = p.stat().st_size / 1e6
        run_process([*CTXTOOL, "stats", str(p)])
        wall = statistics.median(run_process([*CTXTOOL, "stats", str(p)]) for _ in range(REPEAT))
        rss = peak_rss_mb([*CTXTOOL, "stats", str(p)])
        if first is None:
            first = (mb, wall, rss)
        row(f"stats scaling, {mb:,.0f} MB", f"{wall:.2f} s ({mb / wall:.0f} MB/s), peak RSS {rss:.0f} MB",
            f"{first[0]:,.0f} MB: {first[1]:.2f} s, {first[2]:.0f} MB",
            f"{wall / first[1]:.1f}x time, {rss / first[2]:.2f}x memory for {mb / first[0]:.0f}x input",
            "time ~ linear, memory < 1.5x")


def bench_truncate_memory(files: list[Path]) -> None:
    """truncate --preset head-tail's peak RSS (the process and its workers) on each file,
    against the first: flat in the input's size (issue 37: from 20 MB to 2 GB)."""
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else None
    first: tuple[float, float] | None = None
    for p in files:
        mb = p.stat().st_size / 1e6
        with tempfile.TemporaryDirectory(dir=base) as d:
            rss = peak_rss_mb([*CTXTOOL, "truncate", "--preset", "head-tail", "--cache-dir", str(Path(d) / "c"),
                               "-o", str(Path(d) / "o.jsonl"), str(p)])
        if first is None:
            first = (mb, rss)
        row(f"truncate peak memory, {mb:,.0f} MB", f"{rss:.0f} MB", f"{first[0]:,.0f} MB: {first[1]:.0f} MB",
            f"{rss / first[1]:.2f}x memory for {mb / first[0]:.0f}x input", "flat (< 1.5x)")


#: a user's sessions: the samples of the session formats, each copied this many times
SESSION_COPIES = 250


def sessions_dir() -> Path:
    """bench/data/sessions: the session samples (Claude Code, Codex, Gemini CLI, pi, Responses
    items) copied SESSION_COPIES times each, one file per session, as a user's directory holds them."""
    d = DATA / "sessions"
    samples = sorted(p for p in (ROOT / "samples").glob("*.jsonl") if p.name != "openai_dataset.jsonl")
    if not (d.is_dir() and len(list(d.iterdir())) == len(samples) * SESSION_COPIES):
        d.mkdir(parents=True, exist_ok=True)
        for p in samples:
            data = p.read_bytes()
            for k in range(SESSION_COPIES):
                (d / f"{k:04}-{p.name}").write_bytes(data)
    return d


def bench_many_files() -> None:
    """Commands over a directory of many small sessions (a user's): whole files on every
    core (manyfiles.run_files), against the same run in one process (-j 1)."""
    d = sessions_dir()
    files = list(d.iterdir())
    mb = sum(f.stat().st_size for f in files) / 1e6
    for cmd, more in (("stats", []), ("usage", []), ("check", ["--json"]), ("compactions", ["--json"]), ("validate", [])):
        run_process([*CTXTOOL, cmd, *more, str(d)])  # warm
        one, ours = paired(lambda c=cmd, m=more: run_process([*CTXTOOL, c, "-j", "1", *m, str(d)]),
                           lambda c=cmd, m=more: run_process([*CTXTOOL, c, *m, str(d)]))
        ratios = ratios_of(one, ours)
        row(f"{cmd} over {len(files):,} session files ({mb:.0f} MB)", f"{statistics.median(ours):.2f} s",
            f"-j 1 {statistics.median(one):.2f} s", spread(ratios) + " faster", "(report)")


def wall(args: list[str], n: int = 15) -> float:
    """The median wall seconds of ``n`` whole processes."""
    return statistics.median(run_process(args) for _ in range(n))


def bench_startup() -> None:
    """``ctxtool --version`` against importing typer alone, the two run in turn (15 pairs)."""
    ours, base = paired(lambda: run_process([*CTXTOOL, "--version"]),
                        lambda: run_process([sys.executable, "-c", "import typer"]), repeat=15)
    ratios = ratios_of(ours, base)  # ours / base: at most 1.0 is as quick as typer's import
    row("ctxtool --version", f"{statistics.median(ours) * 1000:.0f} ms",
        f"python -c 'import typer' {statistics.median(base) * 1000:.0f} ms", spread(ratios), "<= 1.0x (+ noise)")


def bench_plain_tables(small: Path) -> None:
    """The README's claim that tables into a pipe are quicker without rich: each command run
    as it is (plain text, rich not imported) and through rich (``bench/via_rich.py``: the same
    text, laid out by rich), in turn, 10 pairs; the figure is the median of the pairs'
    differences (through rich minus plain), their spread in brackets. The outputs are compared
    first: a row whose two texts differ says so instead of a figure."""
    session = ROOT / "samples" / "claude_code_session.jsonl"
    with tempfile.TemporaryDirectory(prefix="ctxtool-bench-") as d:
        out = str(Path(d) / "out.jsonl")
        for label, args in ((f"stats, {session.name}", ["stats", str(session)]),
                            (f"stats, {small.name}", ["stats", str(small)]),
                            (f"window --max-chars 32000 -o OUT, {small.name}",
                             ["window", "--max-chars", "32000", str(small), "-o", out])):
            plain_cmd = [*CTXTOOL, *args]
            rich_cmd = [sys.executable, str(ROOT / "bench" / "via_rich.py"), *args]
            texts = [subprocess.run(cmd, capture_output=True, check=True) for cmd in (plain_cmd, rich_cmd)]
            if (texts[0].stdout, texts[0].stderr) != (texts[1].stdout, texts[1].stderr):
                row(f"tables without rich: {label}", "-", "-", "the two texts differ: no figure", "same text")
                continue
            plain, rich = paired(partial(run_process, plain_cmd), partial(run_process, rich_cmd), repeat=10)
            diffs = [(r - p) * 1000 for p, r in zip(plain, rich, strict=True)]
            row(f"tables without rich: {label}", f"{statistics.median(plain) * 1000:.0f} ms",
                f"through rich {statistics.median(rich) * 1000:.0f} ms",
                f"{statistics.median(diffs):.0f} ms quicker (pairs {min(diffs):.0f} to {max(diffs):.0f})",
                "README: about 30 ms quicker")


def main() -> int:
    print(f"ctxtool benchmarks ({os.cpu_count()} cores, {REPEAT} runs a row); each figure beside its baseline, same run\n",
          flush=True)
    big = generate(DATA / f"ds{BIG // 1_000_000}.jsonl", BIG)
    small = generate(DATA / f"ds{BIG // 10_000_000}.jsonl", BIG // 10)
    scaling = [small, big]
    if os.environ.get("CTXTOOL_BENCH_2GB") == "1":
        scaling.append(generate(DATA / f"ds{BIG // 100_000}.jsonl", BIG * 10))
    sessions = from_corpus(DATA / "ds_sessions20.jsonl", CORPUS, BIG // 10)
    print(f"datasets: {big.name} {big.stat().st_size / 1e6:.0f} MB, {small.name} {small.stat().st_size / 1e6:.0f} MB"
          + (f", {sessions.name} {sessions.stat().st_size / 1e6:.0f} MB (real sessions)" if sessions else "") + "\n")
    sections: list[tuple[str, list[Callable[[], None]]]] = [
        ("stats against the parse limit", [lambda: bench_stats_vs_parse(big), lambda: bench_stats_tiktoken(small)]),
        ("against the peers (their loop, ctxtool's whole process)",
         [lambda: bench_peers(small, small.name), lambda: bench_window_read(small, small.name)]),
        ("scaling", [lambda: bench_scaling(scaling), bench_many_files, bench_startup, lambda: bench_plain_tables(small)]),
    ]
    try:
        from bench import tools as tools_bench

        sections.append(("tool outputs", [lambda: tools_bench.run(big, row, CORPUS, sessions)]))
    except ImportError:
        pass
    try:
        from bench import compact as compact_bench

        sections.append(("compaction", [lambda: compact_bench.run(small, row, CORPUS)]))
    except ImportError:
        pass
    if sessions is not None:
        sections.insert(2, ("against the peers on real sessions (the corpus as OpenAI records, repeated to 20 MB)",
                            [lambda: bench_peers(sessions, sessions.name),
                             lambda: bench_window_read(sessions, sessions.name)]))
    sets = [small, *([sessions] if sessions is not None else []), *([big] if BIG_PEERS else [])]
    sections.insert(0, ("command against command: ctxtool's whole process, the peer's whole script (issue 37)",
                        [lambda p=p: bench_commands(p, p.name) for p in sets]))
    sections.insert(1, ("library against library: one process, the same records, each in its own loop (issue 37)",
                        [lambda p=p: bench_library(p, p.name) for p in sets[:2]]))
    sections.append(("distributed", [lambda: __import__("bench.distributed", fromlist=["run"]).run(big, row)]))
    sections.append(("what compaction keeps", [lambda: __import__("bench.retention", fromlist=["run"]).run(CORPUS, row)]))
    sections.append(("Parquet datasets", [lambda: __import__("bench.parquet", fromlist=["run"]).run(row)]))
    sections.append(("token estimates against recorded usage",
                     [lambda: __import__("bench.accuracy", fromlist=["run"]).run(CORPUS, row)]))
    only = [w.strip() for w in os.environ.get("CTXTOOL_BENCH_SECTIONS", "").split(",") if w.strip()]
    if only:
        sections = [(t, fns) for t, fns in sections if any(w in t for w in only)]
    for title, fns in sections:
        print(f"[{title}]", flush=True)
        for fn in fns:
            fn()
        print()
    print("| figure | measured | baseline (same run) | result | target |")
    print("|---|---|---|---|---|")
    for r in ROWS:
        print("| " + " | ".join(r) + " |")
    (DATA / "results.json").write_text(json.dumps(ROWS, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
