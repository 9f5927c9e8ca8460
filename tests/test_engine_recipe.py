"""The Dask/Spark recipe of docs/distributed.md, run as written through a plain
multiprocessing map: its output and reports equal one local run's."""

from __future__ import annotations

import multiprocessing
import re
import sys
import types
from pathlib import Path

from test_compact import write_dataset

from ctxtool.cache import RefCache
from ctxtool.tool_outputs import files as tools_ops

DOC = Path(__file__).resolve().parents[1] / "docs" / "distributed.md"


def recipe() -> types.ModuleType:
    m = re.search(r"```python recipe\n(.*?)```", DOC.read_text(), re.S)
    assert m, "docs/distributed.md has no recipe block"
    mod = types.ModuleType("ctxtool_recipe")
    sys.modules[mod.__name__] = mod  # its functions pickle by name; forked workers inherit it
    exec(compile(m.group(1), str(DOC), "exec"), mod.__dict__)
    return mod


def test_the_recipe_gives_what_a_local_run_gives(tmp_path: Path) -> None:
    r = recipe()
    src = write_dataset(tmp_path / "d.jsonl", n=12, turns=2, filler=6000)
    limits = r.make_op("unused").limits
    plain = tools_ops.truncate_file(str(src), str(tmp_path / "plain.jsonl"), limits=limits, cache=tmp_path / "c0")
    op = r.make_op(str(tmp_path / "c1"))
    (tmp_path / "out").mkdir()
    from ctxtool.run.parallel import run_range

    with multiprocessing.get_context("fork").Pool(2) as pool:
        results = pool.map(run_range, r.range_jobs(op, str(src), 3, str(tmp_path / "out")))
        done = pool.map(r.process_record, r.record_jobs(r.make_op(str(tmp_path / "c2")), str(src)))
    parts = sorted((tmp_path / "out").iterdir())
    assert len(parts) == 3
    assert b"".join(p.read_bytes() for p in parts) == (tmp_path / "plain.jsonl").read_bytes()
    assert b"".join(data + b"\n" for data, _ in done) == (tmp_path / "plain.jsonl").read_bytes()
    for rep in (r.total(x.report for x in results), r.total(rep for _, rep in done)):
        assert (rep.transcripts, rep.truncated, rep.bytes_after) == (plain.transcripts, plain.truncated, plain.bytes_after)
    assert sorted(RefCache(tmp_path / "c1").manifest()) == sorted(RefCache(tmp_path / "c0").manifest())
