"""Library against library (issue 37): in one process, over the same records, ctxtool's public
functions against LangChain's and litellm's, each in its own loop.

    python bench/library.py FILE REPEAT   ->  one JSON line per row (read by bench/run.py)

Run by bench/run.py with the peers' python (``.venv-bench``), ctxtool's checkout first on
``sys.path`` and ctxtool's environment's site-packages (``CTXTOOL_BENCH_SITE``) last: the
peers import their own pinned packages, ctxtool finds the few the peers' environment lacks.

The file is read and parsed once (orjson), before any loop. The first rows give every library
the same parsed records, the message dicts (what the peers' APIs take; LangChain turns them
into its message objects inside each call, as its users' programs do): ctxtool's stats tally
(:func:`ctxtool.stats.fast.tally_openai`, what ``stats`` and ``window`` read a dataset record
with) and window plan. Then :func:`ctxtool.run.records.process`, like against like: handed the
same parsed records as the peers (the dict a pipeline holding dataset rows has; the format
detected from each record, or named as ``fmt='openai'``: the peers assume OpenAI-style
messages), and handed each record's bytes with the peer's loop parsing the same bytes
(``orjson.loads``, as the peers' scripts do). The older rows, ``records.process`` on bytes
against the peers on dicts parsed before their loop (the parse inside ctxtool's time only),
are printed too, so labelled. Two ``records.process(StatsOp())`` rows also merge the reports
(``merge_reports``) and read them: a report counts its largest outputs' lines when they are
first read, which the other rows never do. The ``records.process(WindowOp)`` rows write the kept record;
they run again against ``trim_messages`` writing its trimmed record too (its messages back as
OpenAI dicts, ``orjson.dumps``), as the whole-process rows' script does. Last, each library on its own objects,
made outside the loops: ctxtool's transcripts (:func:`ctxtool.formats.read`) for
``transcript_stats``, ``window_messages`` and ``count_messages`` (heuristic: the function that
does what ``count_tokens_approximately`` does, where ``transcript_stats`` makes a whole report;
and o200k_base); LangChain's message objects
(``convert_to_messages``) for its two functions. Each row runs in a child forked from the process
that loaded them (``CTXTOOL_BENCH_FORK=0``: all in this one), so that every row starts from the
same heap. Each pair runs once untimed, then ``REPEAT``
times in turn (peer, ctxtool, peer, ctxtool ...); a row is the median of the pairs' ratios
(peer time / ctxtool time: how many times faster ctxtool is) and their spread. The exact
counts use ctxtool's default threads (one per core) where the texts are many.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
if os.environ.get("CTXTOOL_BENCH_SITE"):
    sys.path.append(os.environ["CTXTOOL_BENCH_SITE"])
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

#: the budgets of the window rows: 32,000 characters for ctxtool, 8,000 approximate tokens
#: (4 characters a token) for trim_messages, as the whole-process rows
MAX_CHARS = 32000
MAX_TOKENS = 8000


def _timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def pairs(rows: list[tuple[Any, ...]], repeat: int, reset: Callable[[], None]) -> None:
    """Each row's two loops: once untimed, then ``repeat`` times in turn, ``reset`` called
    and the cyclic collector run (untimed) before each, so that a full collection of what the
    rows before left falls in no row's time, the peer's or ctxtool's; one JSON line a row (ctxtool's loop None: a row this checkout's
    API cannot run, said so). A row's optional fifth member is its target, when it is not 2x
    (a floor: no ctxtool code)."""
    for name, peer_name, peer, ours, *target in rows:
        if ours is not None and os.environ.get("CTXTOOL_BENCH_FORK", "1") == "1":
            # each row in a child forked from the loaded process: every row starts from the
            # same heap, whatever the rows before it left (a row's times otherwise swing with them)
            sys.stdout.flush()
            pid = os.fork()
            if pid:
                os.waitpid(pid, 0)
                continue
            try:
                _row(name, peer_name, peer, ours, target, repeat, reset)
            finally:
                sys.stdout.flush()
                os._exit(0)
        _row(name, peer_name, peer, ours, target, repeat, reset)


def _row(name: str, peer_name: str, peer: Callable[[], object], ours: Callable[[], object] | None,
         target: list[str], repeat: int, reset: Callable[[], None]) -> None:
    if ours is None:
        print(json.dumps({"name": name, "peer": peer_name, "missing": "records.process takes bytes only here"}),
              flush=True)
        return
    peer()
    ours()
    pt: list[float] = []
    ot: list[float] = []
    for _ in range(repeat):
        reset()
        gc.collect()
        pt.append(_timed(peer))
        reset()
        gc.collect()
        ot.append(_timed(ours))
    print(json.dumps({"name": name, "peer": peer_name, "peer_times": pt, "ours_times": ot, **(
        {"target": target[0]} if target else {})}), flush=True)


def main(path: str, repeat: int) -> int:
    import litellm
    import orjson
    from langchain_core.messages import convert_to_messages, convert_to_openai_messages, trim_messages
    from langchain_core.messages.utils import count_tokens_approximately

    from ctxtool import formats
    from ctxtool.history.window import WindowOp, WindowRows, plan_rows, window_messages
    from ctxtool.run import records
    from ctxtool.run.operation import merge_reports
    from ctxtool.stats.fast import tally_openai
    from ctxtool.stats.op import StatsOp
    from ctxtool.stats.transcript import transcript_stats
    from ctxtool.tokens.count import count_messages, get_tokenizer
    from ctxtool.tokens.heuristic import estimate

    with open(path, "rb") as f:
        lines = [ln for ln in f if ln.strip()]
    recs: list[Any] = [orjson.loads(ln) for ln in lines]  # the parsed records, given to both sides
    dicts: list[Any] = [orjson.loads(ln)["messages"] for ln in lines]
    lc = [convert_to_messages(m) for m in dicts]
    ts = list(formats.read(path))
    heuristic = get_tokenizer("heuristic")
    exact = get_tokenizer("o200k_base")
    exact.count("warm")  # the encoding loaded before any loop, as litellm's is by its warm run
    stats_op, exact_op = StatsOp(), StatsOp(tokenizer="o200k_base")
    window_op = WindowOp(max_chars=MAX_CHARS, max_messages=1_000_000)
    n = len(lines)
    counter = exact.counter

    def forget() -> None:
        """ctxtool's exact counter remembers long texts it counted (a dataset repeats its system
        prompt in every record): emptied before each timed loop, so that no run counts what the
        run before it counted (a whole process starts empty too)."""
        counter._memo.clear()
        counter._memo_chars = 0

    print(json.dumps({"records": n, "transcripts": len(ts)}), flush=True)

    try:
        records.process(stats_op, recs[0], path=path)
        parsed_api = True
    except (AttributeError, TypeError):  # an older checkout (bench/run.py's before and after runs)
        parsed_api = False

    def process(op: Any, given: list[Any] | None = None, fmt: str | None = None) -> Callable[[], object] | None:
        """records.process over each record: its bytes (``given`` None) or its parsed value."""
        if given is not None and not parsed_api:
            return None
        src = lines if given is None else given
        return lambda: [records.process(op, r, path=path, line=i + 1, fmt=fmt) for i, r in enumerate(src)]

    def tally_tokens() -> list[int]:  # stats' tally of each record (stats_fast), its heuristic tokens
        out = []
        for m in dicts:
            tl = tally_openai(m, False)
            out.append(sum(estimate(c) for c in tl.chars) if tl is not None else -1)
        return out

    def tally_window() -> list[list[bool]]:  # window's plan from the same tally (as WindowOp's fast read)
        out = []
        for m in dicts:
            tl = tally_openai(m, False, pairs=True)
            out.append(plan_rows(WindowRows.of_tally(tl), max_chars=MAX_CHARS, max_messages=1_000_000)[0] if tl is not None else [])
        return out

    def tally_exact() -> list[int]:  # the exact count of each record's texts, as stats --tokenizer o200k_base
        out = []
        for m in dicts:
            tl = tally_openai(m, True)
            out.append(sum(exact.count_many([x for xs in tl.texts for x in xs])) if tl is not None and tl.texts is not None else -1)
        return out

    approx = "count_tokens_approximately"
    trim = f"trim_messages (last, {MAX_TOKENS:,} tokens)"
    trim_w = trim + ", the trimmed record written (convert_to_openai_messages, orjson.dumps)"
    lc_count = lambda: [count_tokens_approximately(m) for m in dicts]  # noqa: E731
    lc_trim = lambda: [  # noqa: E731
        trim_messages(m, max_tokens=MAX_TOKENS, strategy="last", token_counter=count_tokens_approximately,
                      include_system=True) for m in dicts]
    lc_count_own = lambda: [count_tokens_approximately(m) for m in lc]  # noqa: E731
    lc_trim_own = lambda: [  # noqa: E731
        trim_messages(m, max_tokens=MAX_TOKENS, strategy="last", token_counter=count_tokens_approximately,
                      include_system=True) for m in lc]
    lite = lambda: [litellm.token_counter(model="gpt-4o", messages=m) for m in dicts]  # noqa: E731
    # like against like: the peers over the same parsed records, or parsing the same bytes
    lc_count_recs = lambda: [count_tokens_approximately(r["messages"]) for r in recs]  # noqa: E731
    lc_count_bytes = lambda: [count_tokens_approximately(orjson.loads(ln)["messages"]) for ln in lines]  # noqa: E731
    lc_trim_recs = lambda: [  # noqa: E731
        trim_messages(r["messages"], max_tokens=MAX_TOKENS, strategy="last", token_counter=count_tokens_approximately,
                      include_system=True) for r in recs]
    lc_trim_bytes = lambda: [  # noqa: E731
        trim_messages(orjson.loads(ln)["messages"], max_tokens=MAX_TOKENS, strategy="last",
                      token_counter=count_tokens_approximately, include_system=True) for ln in lines]
    # the peer writing what it kept, as ctxtool's "record written" rows do (the whole-process row's script writes it too):
    # a new record (the caller's is not changed), its messages back as OpenAI dicts, its bytes
    lc_trim_recs_written = lambda: [  # noqa: E731
        orjson.dumps({**r, "messages": convert_to_openai_messages(trim_messages(
            r["messages"], max_tokens=MAX_TOKENS, strategy="last", token_counter=count_tokens_approximately,
            include_system=True))}) for r in recs]

    def lc_trim_bytes_written() -> list[bytes]:
        out = []
        for ln in lines:
            r = orjson.loads(ln)
            r["messages"] = convert_to_openai_messages(trim_messages(
                r["messages"], max_tokens=MAX_TOKENS, strategy="last", token_counter=count_tokens_approximately,
                include_system=True))
            out.append(orjson.dumps(r))
        return out

    lite_recs = lambda: [litellm.token_counter(model="gpt-4o", messages=r["messages"]) for r in recs]  # noqa: E731
    lite_bytes = lambda: [litellm.token_counter(model="gpt-4o", messages=orjson.loads(ln)["messages"])  # noqa: E731
                          for ln in lines]
    same = "the same parsed records"

    def merged(op: Any, given: list[Any] | None) -> Callable[[], object] | None:
        """records.process over each record, then what a caller does with the reports: merged
        (merge_reports, as docs/distributed.md shows) and every figure of what is held made,
        the line counts of the largest outputs included (``kept``: what stats reports)."""
        one = process(op, given)
        if one is None:
            return None
        return lambda: merge_reports(r.report for r in one()).kept()  # type: ignore[union-attr]

    lc_total_recs = lambda: sum(count_tokens_approximately(r["messages"]) for r in recs)  # noqa: E731

    def output_lines() -> int:  # the lines of every tool output, counted as a report gives them (no ctxtool code)
        return sum(c.count("\n") + 1 for r in recs for m in r["messages"]
                   if m.get("role") == "tool" and isinstance(c := m.get("content"), str))

    lc_total_bytes = lambda: sum(count_tokens_approximately(orjson.loads(ln)["messages"]) for ln in lines)  # noqa: E731
    both = "each record's bytes, parsed in the loop (orjson)"
    wnd = f"WindowOp(max_chars={MAX_CHARS})"

    def window_rows(peer: str, on_recs: Callable[[], object], on_bytes: Callable[[], object]) -> list[Any]:
        """The four records.process(WindowOp) rows (the record written), against the peer's loop
        over the same parsed records and over each record's bytes."""
        return [
            (f"records.process({wnd}) on {same} (format detected, record written)", f"{peer} on {same}",
             on_recs, process(window_op, recs)),
            (f"records.process({wnd}, fmt='openai') on {same} (record written)", f"{peer} on {same}",
             on_recs, process(window_op, recs, "openai")),
            (f"records.process({wnd}) on {both} (format detected, record written)", f"{peer} on {both}",
             on_bytes, process(window_op)),
            (f"records.process({wnd}, fmt='openai') on {both} (record written)", f"{peer} on {both}",
             on_bytes, process(window_op, None, "openai")),
        ]

    pairs([
        ("stats_fast.tally_openai + heuristic tokens, on the parsed dicts", approx + " on the parsed dicts",
         lc_count, tally_tokens),
        (f"window.plan_rows (max_chars {MAX_CHARS}) from the tally, on the parsed dicts", trim + " on the parsed dicts",
         lc_trim, tally_window),
        ("stats_fast.tally_openai + o200k_base count, on the parsed dicts", "token_counter (gpt-4o) on the parsed dicts",
         lite, tally_exact),
        # like against like (issue 37): both sides given the same parsed records, or both parsing the same bytes
        (f"records.process(StatsOp()) on {same} (format detected per record)", f"{approx} on {same}",
         lc_count_recs, process(stats_op, recs)),
        (f"records.process(StatsOp(), fmt='openai') on {same}", f"{approx} on {same}", lc_count_recs,
         process(stats_op, recs, "openai")),
        (f"records.process(StatsOp()) on {both} (format detected per record)", f"{approx} on {both}",
         lc_count_bytes, process(stats_op)),
        (f"records.process(StatsOp(), fmt='openai') on {both}", f"{approx} on {both}", lc_count_bytes,
         process(stats_op, None, "openai")),
        # the same, the reports merged and every count they hold made (the lines of the largest
        # outputs are counted when first read: the rows above never read them); the peer sums its counts
        (f"records.process(StatsOp()) on {same}, the reports merged and read (merge_reports, every line count made)",
         f"{approx} on {same}, summed", lc_total_recs, merged(stats_op, recs)),
        (f"records.process(StatsOp()) on {both}, the reports merged and read (merge_reports, every line count made)",
         f"{approx} on {both}, summed", lc_total_bytes, merged(stats_op, None)),
        # what the two rows above cannot go under: counting the lines they report, and nothing else
        ("floor: the lines of every tool output counted (str.count on each tool message's text; no ctxtool code)",
         f"{approx} on {same}, summed", lc_total_recs, output_lines,
         "(the merged rows' bound: their line counts alone; 2x leaves the rest peer/2 - this)"),
        *window_rows(trim, lc_trim_recs, lc_trim_bytes),
        # the same four, the peer writing its trimmed record too (convert_to_openai_messages, orjson.dumps)
        *window_rows(trim_w, lc_trim_recs_written, lc_trim_bytes_written),
        (f"records.process(StatsOp(tokenizer='o200k_base')) on {same} (format detected)",
         f"token_counter (gpt-4o) on {same}", lite_recs, process(exact_op, recs)),
        (f"records.process(StatsOp(tokenizer='o200k_base')) on {both} (format detected)",
         f"token_counter (gpt-4o) on {both}", lite_bytes, process(exact_op)),
        # the older rows: ctxtool given bytes, the peers given dicts parsed before their loop (unequal inputs)
        ("records.process(StatsOp()) on each record's bytes (parse inside; old row: the peer's input parsed before its loop)",
         approx + " on the parsed dicts", lc_count, process(stats_op)),
        (f"records.process(WindowOp(max_chars={MAX_CHARS})) on each record's bytes (parse inside, record written; "
         "old row: the peer's input parsed before its loop)", trim + " on the parsed dicts", lc_trim, process(window_op)),
        ("records.process(StatsOp(tokenizer='o200k_base')) on each record's bytes (parse inside; old row: the peer's "
         "input parsed before its loop)", "token_counter (gpt-4o) on the parsed dicts", lite, process(exact_op)),
        ("stats.transcript_stats (heuristic) on ctxtool's transcripts", approx + " on LangChain's messages",
         lc_count_own, lambda: [transcript_stats(t, None, heuristic) for t in ts]),
        (f"window.window_messages (max_chars {MAX_CHARS}) on ctxtool's transcripts", trim + " on LangChain's messages",
         lc_trim_own, lambda: [window_messages(t.messages, max_chars=MAX_CHARS, max_messages=1_000_000) for t in ts]),
        # the function that does what count_tokens_approximately does (each message's tokens,
        # estimated from its characters), where transcript_stats makes a whole report
        ("tokens.count_messages (heuristic) on ctxtool's transcripts", approx + " on LangChain's messages",
         lc_count_own, lambda: [count_messages(t.messages, heuristic) for t in ts]),
        ("tokens.count_messages (o200k_base) on ctxtool's transcripts", "token_counter (gpt-4o) on the parsed dicts",
         lite, lambda: [count_messages(t.messages, exact) for t in ts]),
    ], repeat, forget)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2])))
