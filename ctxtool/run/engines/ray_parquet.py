"""``--engine ray`` over Parquet shards, with Ray Data's own Parquet I/O.

Ray Data regroups rows into blocks of its own and names the files it writes; a dataset's
sharding (``data/train-00000-of-00012.parquet`` ...) and its row numbers (a record's bytes
depend on its row: message ids, restore's stash) must not change. So each input shard is
its own Ray Data job:

1. ``ray.data.read_parquet(shard)`` reads it (row order kept: ``preserve_order``) into blocks
   in the object store (:meth:`ray.data.Dataset.to_arrow_refs`): only the conversation and
   the id column when nothing is written (``stats``, ``validate``);
2. one task runs the operation over those blocks in order (:func:`ctxtool.io.parquet.run_tables`:
   the same code as a run on this host, so the rows come out the same), fetching one block
   at a time, and yields the output blocks (a streaming generator: the driver owns them);
3. ``Dataset.write_datasink`` writes them (``ray.data.from_arrow_refs``) with a datasink of
   this module: all of a shard's blocks go to one write task (``min_rows_per_write``), which
   streams them, in order, into one file with the input's schema and metadata, codec and
   row-group size, in a temporary directory beside the output; the file is renamed to the
   input shard's name when the write is complete (a shard is there whole or not at all).
   Ray's own ``write_parquet`` is not used: it names its files itself, and it writes through
   ``pyarrow.dataset.write_dataset(use_threads=True)`` without ``preserve_order``, which
   pyarrow documents may change the order of rows (a test saw a shard's rows 18-19 and
   20-21 swapped);
4. the shard's ``_done`` entry is written, so a re-run skips it (:mod:`ctxtool.run.engines.shards`).

Up to :func:`window` shards run at once, each task on :data:`~ctxtool.run.engines.ray.CPUS_PER_TASK`
of a CPU, leaving room for Ray Data's read and write tasks. (Running each shard's read and
write in a driver thread of its own was tried: no gain measured on a loaded 2-CPU host, and
it starts many more worker processes.)
"""

from __future__ import annotations

import contextlib
import functools
import os
import pickle
from collections.abc import Iterator
from typing import Any

from ...errors import CtxtoolError
from ...io import jsonl as jsonio
from ...io import parquet, urls
from ...io.events import EventLog
from ...io.paths import make_temp_dir, remove_quietly
from .jobs import ShardJob, ShardResult, _put, _umask
from .ray import CPUS_PER_TASK, RayEngine

#: a shard's ``io`` in ``_report.json``
IO = "ray.data.read_parquet, Dataset.write_datasink"


def window(ray: Any, engine: RayEngine) -> int:
    """Shards in flight at once: ``--workers``, else the cluster's CPUs in tasks, less one
    task's room for Ray Data's own read and write tasks."""
    if engine.workers:
        return engine.workers
    cpus = float(ray.cluster_resources().get("CPU", 1))
    return max(1, int(cpus / CPUS_PER_TASK) - 1)


def arrow_path(path: str) -> tuple[Any, str]:
    """A path as Ray Data's Parquet I/O takes it: (a pyarrow filesystem wrapping the fsspec
    one that serves a URL, its path inside), or (None, a local path)."""
    if not urls.is_url(path):
        return None, path
    from pyarrow.fs import FSSpecHandler, PyFileSystem

    fs, inner = urls.filesystem(path)
    return PyFileSystem(FSSpecHandler(fs)), inner


def _read(ray: Any, job: ShardJob) -> tuple[list[Any], Any, str, int]:
    """The shard read by Ray Data: its blocks (refs, in row order), its schema, codec and
    row-group size (from its footer)."""
    pf = parquet._open(job.shard.input)
    col = parquet.find_column(pf.schema_arrow, job.messages_column, job.shard.input)
    fs, inner = arrow_path(job.shard.input)
    meta = pf.metadata
    group = meta.row_group(0).num_rows if meta.num_row_groups else 1
    if not meta.num_rows:
        return [], pf.schema_arrow, parquet.compression(pf, col), group
    ds = ray.data.read_parquet(inner, filesystem=fs, num_cpus=CPUS_PER_TASK, file_extensions=None)
    if job.output is None:  # nothing written: only the columns a row's record is made of
        ds = ds.select_columns(parquet.columns_read(col))
    return ds.to_arrow_refs(), pf.schema_arrow, parquet.compression(pf, col), group


def _run_blocks(job_bytes: bytes, refs: list[Any], schema: Any) -> Iterator[Any]:
    """The task: the operation over one shard's blocks; yields the output's tables, then the
    pickled ``("ok", (ShardResult, output schema, rows written))`` or ``("error", CtxtoolError)``."""
    import ray

    job: ShardJob = pickle.loads(job_bytes)
    s = job.shard

    def tables(columns: list[str], groups: bool) -> Iterator[Any]:
        for ref in refs:  # one block at a time (a list of refs is not fetched with the task)
            t = ray.get(ref)
            yield t.select(columns)
            del t

    log = EventLog(None) if job.events else None
    try:
        col = parquet.find_column(schema, job.messages_column, s.input)
        with parquet.run_tables(job.op, s.input, col, schema, tables, write=job.output is not None, fmt=job.fmt,
                                on_error=job.on_error, events=log, threads=job.threads, runner=job.local) as done:
            rows = 0
            for t in done.tables or ():
                rows += t.num_rows
                yield t
        run = done.run
        res = ShardResult(s.name, run.report, run.format, run.transcripts, run.errors, log.events if log else [],
                          io=IO)
        out: Any = ("ok", (res, done.schema, rows))
    except CtxtoolError as e:  # the user's error, as it is: raised again on the driver
        out = ("error", e)
    yield pickle.dumps(out)


@functools.cache
def _task(ray: Any) -> Any:
    return ray.remote(num_cpus=CPUS_PER_TASK, num_returns="streaming")(_run_blocks)


def _write(ray: Any, job: ShardJob, refs: list[Any], rows: int, schema: Any, codec: str, group: int) -> None:
    """The shard's output blocks, in order, as one Parquet file named as the input shard:
    ``Dataset.write_datasink`` hands them all to one write task (``min_rows_per_write``: the
    shard's rows), which streams them into a file in a temporary directory beside the
    output, renamed into place when the write is complete."""
    assert job.output is not None
    dest = job.output
    if not rows:  # every row left out: an empty table of the schema
        parquet._write(iter(()), schema, codec, dest)
        return
    parent = dest.rsplit("/", 1)[0]
    if urls.is_url(dest):
        import uuid

        tmp = urls.join(parent, f".ctxtool-ray-{uuid.uuid4().hex}")
    else:
        os.makedirs(parent, exist_ok=True)
        tmp = make_temp_dir(parent, "ctxtool-ray")
    try:
        sink = _sink_class(ray)(tmp, dest, schema, codec, group, rows)
        ray.data.from_arrow_refs(refs).write_datasink(sink, ray_remote_args={"num_cpus": CPUS_PER_TASK})
    finally:
        _remove(tmp)


@functools.cache
def _sink_class(ray: Any) -> Any:
    """The :class:`ray.data.Datasink` of one shard (defined once, when Ray is there).

    Not ``write_parquet``'s: see the module (row order, file names)."""

    class ShardSink(ray.data.Datasink):
        def __init__(self, tmp: str, dest: str, schema: Any, codec: str, group: int, rows: int) -> None:
            self.tmp, self.dest, self.schema, self.codec, self.group, self.rows = tmp, dest, schema, codec, group, rows

        @property
        def min_rows_per_write(self) -> int:
            return self.rows  # every block of the shard to one write task: one file, rows in order

        def write(self, blocks: Any, ctx: Any) -> int:
            import pyarrow as pa
            import pyarrow.parquet as pq

            part = urls.join(self.tmp, f"part-{ctx.task_idx}{parquet.SUFFIX}")
            written = 0
            with (urls.filesystem(part)[0].open(urls.filesystem(part)[1], "wb") if urls.is_url(part)
                  else open(part, "wb")) as fh, pq.ParquetWriter(fh, self.schema, compression=self.codec) as w:
                pending: list[Any] = []
                held = 0
                for block in blocks:  # row groups of the input's size, whatever the blocks' sizes
                    t = block if block.schema.equals(self.schema, check_metadata=True) else block.cast(self.schema)
                    pending.append(t)
                    held += t.num_rows
                    if held >= self.group:
                        whole = pa.concat_tables(pending)
                        cut = held - held % self.group
                        w.write_table(whole.slice(0, cut), row_group_size=self.group)
                        written += cut
                        pending, held = [whole.slice(cut)], held - cut
                if held:
                    w.write_table(pa.concat_tables(pending), row_group_size=self.group)
                    written += held
            return written

        def on_write_complete(self, write_result: Any) -> None:
            done = sum(int(r) for r in write_result.write_returns)
            if done != self.rows:
                raise CtxtoolError(f"Ray Data wrote {done} rows of {self.rows}", path=self.dest)
            _commit(self.tmp, self.dest)

    return ShardSink


def _commit(tmp: str, dest: str) -> None:
    """The one file Ray Data wrote into ``tmp``, renamed to ``dest``."""
    if urls.is_url(tmp):
        fs, inner = urls.filesystem(tmp)
        files = [p for p in fs.find(inner) if p.endswith(parquet.SUFFIX)]
        if len(files) != 1:
            raise CtxtoolError(f"Ray Data wrote {len(files)} files for one shard", path=dest)
        fs.mv(files[0], urls.filesystem(dest)[1])
        return
    files = [os.path.join(tmp, f) for f in os.listdir(tmp) if f.endswith(parquet.SUFFIX)]
    if len(files) != 1:
        raise CtxtoolError(f"Ray Data wrote {len(files)} files for one shard", path=dest)
    os.chmod(files[0], 0o666 & ~_umask())
    os.replace(files[0], dest)


def _remove(tmp: str) -> None:
    if urls.is_url(tmp):
        if urls.info(tmp) is not None:
            fs, inner = urls.filesystem(tmp)
            fs.rm(inner, recursive=True)
        return

    remove_quietly(tmp)


def run_shards(engine: RayEngine, jobs: list[ShardJob]) -> Iterator[ShardResult]:
    """The Parquet shards ``jobs`` on the engine's cluster, their results in job order, each as
    it is done; the first error (in job order) is raised as it is."""
    ray = engine._ray()
    dumps = ray.cloudpickle.dumps  # an operation defined in __main__ (a notebook) travels by value
    running: list[tuple[ShardJob, Any, list[Any], str, int]] = []
    todo = iter(jobs)
    n = window(ray, engine)
    try:
        while True:
            for job in todo:
                blocks, schema, codec, group = _read(ray, job)
                gen = _task(ray).remote(dumps(job), blocks, schema)
                running.append((job, gen, blocks, codec, group))
                if len(running) >= n:
                    break
            if not running:
                return
            job, gen, blocks, codec, group = running.pop(0)
            out = list(gen)  # the output's blocks, then the result (the task's last item)
            kind, value = pickle.loads(ray.get(out.pop()))
            del blocks
            if kind == "error":
                raise value
            res, schema, rows = value
            if job.output is not None:
                _write(ray, job, out, rows, schema, codec, group)
            del out
            if job.done is not None:
                _put(job.done, jsonio.dumps_pretty({"settings": job.settings, **res.to_json(job.shard)}))
            yield res
    finally:
        for _, gen, *_rest in running:  # after an error: the shards still running are stopped
            with contextlib.suppress(Exception):
                ray.cancel(gen)
