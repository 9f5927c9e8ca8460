"""A run as shards: inputs (globs, URLs) cut into shards (a whole file, or a byte range of a
dataset file), each run by the same code as a local run, so the bytes are the same. The output
is a directory of ``part-NNNNN`` files, a ``_done`` entry per shard (a re-run skips it) and a
``_report.json``; with ``join`` one file. The layout and the line numbering of ranges:
docs/architecture.md, "Running, in more detail"."""

from __future__ import annotations

import hashlib
import itertools
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ... import formats
from ...errors import CtxtoolError, Failure, refuse_empty_path
from ...formats.base import ErrorPolicy
from ...formats.walk import DONE, REPORT, walk_files
from ...io import jsonl as jsonio
from ...io import urls
from ...io.events import EventLog
from ...io.files import check_input, input_size, open_raw
from ...io.outputs import atomic_output, output_error
from ...io.paths import inside, make_temp, refuse_overwrite, refuse_overwrite_any
from ..operation import FileRun, Operation, R, RunContext
from .base import Engine
from .jobs import Shard, ShardJob, ShardResult, _put, _umask

SHARD_BYTES = 32 << 20  # a dataset file is cut into ranges of about this size
VERSION = 1


def settings_hash(op: Operation[Any], fmt: str | None, to: str | None, on_error: str,
                  messages_column: str | None = None) -> str:
    """What makes a shard's output what it is: the operation and its options, formats, policy
    (and a Parquet conversation column, when named)."""
    doc = f"{VERSION}\n{type(op).__module__}.{type(op).__qualname__}\n{op!r}\n{fmt}\n{to}\n{on_error}"
    if messages_column is not None:
        doc += f"\n{messages_column}"
    return hashlib.sha256(doc.encode("utf-8", "surrogatepass")).hexdigest()


def absolute(path: str) -> str:
    """An input as every worker can name it: a URL as it is, a local path made absolute here."""
    return path if urls.is_url(path) else os.path.abspath(urls.local(path))


def _suffix(path: str, to: str | None) -> str:
    name = path.rsplit("/", 1)[-1].lower()
    for c in (".gz", ".zst"):
        name = name.removesuffix(c)
    return ".json" if name.endswith(".json") and to is None else ".jsonl"


def _relative_name(rel: str, to: str | None) -> str:
    """A directory's file as an output name: its relative path, its suffix the output's."""
    rel = rel.replace(os.sep, "/")
    if to is None:
        return rel
    stem = rel
    for c in (".gz", ".zst"):
        stem = stem.removesuffix(c)
    return os.path.splitext(stem)[0] + _suffix(stem, to)


def tree_files(path: str, output: str | None = None) -> list[tuple[str, str]]:
    """The transcript files of a local directory, each with its path relative to it (``/``
    separated), in order (a sharded run's own bookkeeping left out); none is an error.
    ``output``: the run's output directory. Inside ``path``, the files under it are left out
    when an earlier sharded run wrote them (it holds that run's ``_done/`` or ``_report.json``);
    one that holds other transcripts is refused (they would be read as inputs and replaced), as
    is ``path`` itself."""
    skip = output if output is not None and not urls.is_url(output) and inside(output, path) else None
    if skip is not None and inside(path, skip):
        raise CtxtoolError("the output directory is the input directory; inputs are never modified: give -o another "
                           "directory", path=output, kind=Failure.USAGE)
    found = walk_files(path)
    under = [skip is not None and inside(f, skip) for f in found]  # each file asked once
    if skip is not None and any(under) and not (os.path.isdir(os.path.join(skip, DONE)) or os.path.isfile(os.path.join(skip, REPORT))):
        raise CtxtoolError("the output directory is inside the input directory and holds transcripts no earlier run "
                           "wrote there (no _done/): they are inputs; inputs are never modified: give -o another "
                           "directory", path=output, kind=Failure.USAGE)
    files = [(f, os.path.relpath(f, path).replace(os.sep, "/")) for f, u in zip(found, under, strict=True) if not u]
    if not files:
        raise CtxtoolError("directory holds no transcript files (*.jsonl, *.json, compressed or not)",
                           path=path, kind=Failure.NOT_FOUND)
    return files


def plan_shards(
    engine: Engine, paths: list[str], fmt: str | None, to: str | None, op: Operation[Any], shard_bytes: int,
    outdir: str | None = None,
) -> list[Shard]:
    """The shards of ``paths`` (globs expanded), in order; ``outdir``: the run's output
    directory (:func:`tree_files`)."""
    if "-" in paths:
        raise CtxtoolError("stdin cannot be cut into shards: give a file, a glob or a URL", kind=Failure.USAGE)
    # lazy: start-up (loaded only when this runs: ...io)
    from ...io import parquet

    for pat in paths:
        refuse_empty_path(pat)  # not the current directory
    inputs = [absolute(p) for pat in paths for p in urls.expand(pat)]
    shards: list[Shard] = []
    counts: list[tuple[int, str, int, int]] = []  # (shard index, path, start, end) to count lines of
    for path in inputs:
        if parquet.is_parquet(path):  # a Parquet file, or each file of a directory: its name kept
            for f, rel in parquet.shard_files(path):
                check_input(f)
                shards.append(Shard(rel, f, input_size(f), stamp=_stamp(f)))
            continue
        if not urls.is_url(path) and os.path.isdir(path):  # a directory of transcripts: each file one shard,
            for f, rel in tree_files(path, outdir):  # written under its own relative name (its suffix as --to says)
                check_input(f)
                shards.append(Shard(_relative_name(rel, to), f, input_size(f),
                                    stamp=_stamp(f)))
            continue
        check_input(path)
        size = input_size(path)
        stamp = _stamp(path)
        parts = -(-size // shard_bytes) if size else 1
        ranges_ok = parts > 1 and to is None and op.parallel and not op.checks_output  # a check reads a whole output
        cut = formats.split_plan(path, fmt, parts, 1, lines=False, writes=op.writes) if ranges_ok else None
        if cut is None:
            shards.append(Shard(f"part-{len(shards):05d}{_suffix(path, to)}", path, size, stamp=stamp))
            continue
        fname, ranges = cut
        for k, (a, b, _) in enumerate(ranges):
            if k:
                counts.append((len(shards), path, ranges[k - 1][0], a))
            shards.append(Shard(f"part-{len(shards):05d}.jsonl", path, size, a, b, 1, fname, stamp))
    names = [s.name for s in shards]
    if len(set(names)) < len(names):  # Parquet files of the same name from several places
        shards = [s if not parquet.is_parquet_name(s.name) else _renamed(s, f"part-{k:05d}.parquet")
                  for k, s in enumerate(shards)]
    if counts:  # each range's first line: the newlines before it, counted where the workers run
        found = engine.map(_count, [(p, a, b) for _, p, a, b in counts])
        for (k, _, _, _), n in zip(counts, found, strict=True):  # in order: shard k - 1 is done
            shards[k] = _with_line(shards[k], shards[k - 1].first_line + n)
    return shards


def _with_line(s: Shard, first_line: int) -> Shard:
    return Shard(s.name, s.input, s.size, s.start, s.end, first_line, s.format, s.stamp)


def _renamed(s: Shard, name: str) -> Shard:
    return Shard(name, s.input, s.size, s.start, s.end, s.first_line, s.format, s.stamp)


def done_name(shard: Shard) -> str:
    """A shard's ``_done`` entry (flat: a Parquet shard's name may hold directories)."""
    return shard.name.replace("/", "__") + ".json"


def _stamp(path: str) -> str | None:
    """What tells this version of an input from an edited one of the same size."""
    if urls.is_url(path):
        i = urls.info(path) or {}
        v = i.get("ETag") or i.get("etag") or i.get("LastModified") or i.get("mtime") or i.get("created")
        return None if v is None else str(v)
    try:
        return str(os.stat(path).st_mtime_ns)
    except OSError:
        return None


def _count(job: tuple[str, int, int]) -> int:
    return jsonio.count_newlines(*job)


def run_shard(job: ShardJob) -> ShardResult:
    """Process one shard (in any process, on any machine that sees its input and output)."""
    s = job.shard
    log = EventLog(None) if job.events else None
    if s.start is None:
        if job.output is not None and not urls.is_url(job.output) and "/" in s.name:  # a file of a directory's tree
            os.makedirs(os.path.dirname(job.output), exist_ok=True)

        run = job.local(job.op, s.input, job.output, fmt=job.fmt, to=job.to, on_error=job.on_error, jobs=1, events=log,
                       threads=job.threads, messages_column=job.messages_column, keep_ending=not job.plain)
        res = ShardResult(s.name, run.report, run.format, run.transcripts, run.errors, log.events if log else [])
    else:
        # lazy: start-up (`ctxtool redact` would load ctxtool.run.parallel)
        from ..parallel import RangeJob, run_range

        tmp = _local_temp(job.output) if job.output is not None else None
        try:
            r = run_range(RangeJob(job.op, s.input, s.start, s.end or 0, s.first_line, s.format or "", tmp,
                                   job.on_error, job.events, job.threads))
            if tmp is not None and job.output is not None:
                _commit(tmp, job.output)
                tmp = None
        finally:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)
        res = ShardResult(s.name, r.report, r.format, r.transcripts, r.errors, r.events)
    if job.done is not None:
        entry = {"settings": job.settings, **res.to_json(s)}
        _put(job.done, jsonio.dumps_pretty(entry))
    return res


def _local_temp(output: str) -> str:
    """A temporary file for a shard: beside a local output (renamed into place), else in /tmp."""
    where = tempfile.gettempdir() if urls.is_url(output) else os.path.dirname(output)
    fd, tmp = make_temp(where, os.path.basename(output))
    os.close(fd)
    return tmp


def _commit(tmp: str, output: str) -> None:
    if urls.is_url(output):
        urls.put_file(tmp, output)
        Path(tmp).unlink(missing_ok=True)
        return
    os.chmod(tmp, 0o666 & ~_umask())
    os.replace(tmp, output)


def _read(path: str) -> bytes | None:
    try:
        if urls.is_url(path):
            return urls.read_bytes(path) if urls.info(path) is not None else None
        return Path(path).read_bytes()
    except (OSError, CtxtoolError):
        return None


def _exists(path: str) -> bool:
    return (urls.info(path) is not None) if urls.is_url(path) else os.path.isfile(path)


def _reused(job: ShardJob) -> ShardResult | None:
    """The result an earlier run left for this shard, when its settings and input match."""
    if job.done is None or job.output is None:
        return None
    raw = _read(job.done)
    if raw is None:
        return None
    try:
        e = jsonio.loads(raw, path=job.done)
    except CtxtoolError:
        return None
    s = job.shard
    if not isinstance(e, dict) or e.get("settings") != job.settings or {k: e.get(k) for k in s.key()} != s.key():
        return None
    if not _exists(job.output):
        return None
    skipped = [CtxtoolError(str(m)) for m in e.get("skipped") or []]
    return ShardResult(s.name, None, e.get("format"), int(e.get("transcripts") or 0), skipped, reused=True)


def _mkdir(path: str) -> None:
    if urls.is_url(path):
        return  # object storage has no directories to make
    try:
        os.makedirs(os.path.join(path, DONE), exist_ok=True)
    except OSError as e:
        raise output_error(e, path) from e


@dataclass(slots=True)
class Sharding:
    """How to run a file command as shards: the engine, and whether to join the output."""

    engine: Engine
    join: bool = False
    shard_bytes: int = SHARD_BYTES

    def run_file(
        self,
        op: Operation[R],
        path: str,
        output: str | None,
        *,
        fmt: str | None = None,
        to: str | None = None,
        on_error: str = "fail",
        log: EventLog | None = None,
        check: Callable[[str], None] | None = None,
        threads: int = 1,
        messages_column: str | None = None,
        local: Callable[..., FileRun[Any]],
    ) -> FileRun[R]:
        """:func:`ctxtool.run.runner.run_file` as shards on this engine (``path`` may be a glob, a
        Parquet file or a directory of Parquet shards: ``messages_column`` names their
        conversation column); ``local`` runs a whole input in one process (``run_file`` itself)."""
        if output == "-":
            if not self.join:
                raise CtxtoolError("a sharded run writes a directory: give -o DIR (or --join -o FILE)",
                                   kind=Failure.USAGE)
        into = None if output is None or self.join else output.rstrip("/")  # the directory each file is written into
        shards = plan_shards(self.engine, [path], fmt, to, op, self.shard_bytes, into)
        if self.join and output is not None and any(s.name.lower().endswith(".parquet") for s in shards):
            raise CtxtoolError("--join writes one JSON Lines file: a Parquet output is a directory of shards (-o DIR)",
                               kind=Failure.USAGE)
        if output is not None:
            refuse_overwrite([s.input for s in shards if not urls.is_url(s.input)], output)
        if output is None:
            outdir = None
        elif self.join:  # the parts beside the output (resumable), or in /tmp for stdout
            outdir = tempfile.mkdtemp(prefix="ctxtool-parts-") if output == "-" else output.rstrip("/") + ".parts"
        else:
            outdir = output.rstrip("/")
        if into is not None and not urls.is_url(into):  # each file's output, checked before any is written
            refuse_overwrite_any([s.input for s in shards if not urls.is_url(s.input)],
                                 [os.path.join(into, s.name) for s in shards])
        if outdir is not None:
            _mkdir(outdir)
        h = settings_hash(op, fmt, to, on_error, messages_column)
        jobs = [
            ShardJob(op, s, urls.join(outdir, s.name) if outdir else None,
                     urls.join(outdir, DONE, done_name(s)) if outdir else None, h, fmt, to, on_error, log is not None,
                     local, threads, messages_column, plain=self.join and len(shards) > 1)
            for s in shards
        ]
        op.prepare()
        reused: list[ShardResult | None] = [_reused(j) for j in jobs]
        todo = [j for j, r in zip(jobs, reused, strict=True) if r is None]
        # an operation that does not pickle (a closure: archive's summarizer, convert --redact's one table of
        # placeholders) runs its shards in this process, one after the other
        ran = _run(self.engine, todo) if op.parallel else (run_shard(j) for j in todo)
        done: list[ShardResult] = []

        def parts() -> Iterator[Any]:
            """Each shard's report in order as it is done, passed on to the operation and let go
            (memory flat in the number of shards: stats streams each transcript and holds none)."""
            for r in reused:
                done.append(r if r is not None else next(ran))
                report, done[-1].report = done[-1].report, None
                if report is not None:
                    yield report

        reports = parts()
        first = next(reports, None)
        if first is None:  # every shard was done before: an empty report of this operation
            task = op.start(RunContext(path, ErrorPolicy(on_error), None))
            try:
                first = task.finish()
            finally:
                task.close()
        report = op.collect(itertools.chain([first], reports))
        for _ in reports:  # (an operation's collect reads them all)
            pass
        if outdir is not None:
            _put(urls.join(outdir, REPORT), jsonio.dumps_pretty({
                "version": VERSION, "engine": self.engine.name, "operation": op.name, "settings": h,
                "shards": [r.to_json(s) for r, s in zip(done, shards, strict=True)],
                "transcripts": sum(r.transcripts for r in done),
            }))
        if self.join and output is not None and outdir is not None:
            with atomic_output(output, check) as out:
                for j in jobs:
                    assert j.output is not None
                    with open_raw(j.output) as fh:
                        shutil.copyfileobj(fh, out, 1 << 22)
            _remove_tree(outdir)
        if log is not None:
            for r in done:
                log.events.extend(r.events)
        return ShardedRun(report, path, output, next((r.format for r in done if r.format), None),
                          sum(r.transcripts for r in done), [e for r in done for e in r.errors], len(jobs),
                          shards=[r.to_json(s) for r, s in zip(done, shards, strict=True)], engine=self.engine.name)


def _run(engine: Engine, jobs: list[ShardJob]) -> Iterator[ShardResult]:
    """The shards on the engine, results in job order, each as it is done. On Ray, Parquet
    shards are read and written by Ray Data (:mod:`ctxtool.run.engines.ray_parquet`)."""
    # lazy: start-up (loaded only when this runs: ...io)
    from ...io import parquet

    on_data = [engine.name == "ray" and j.shard.start is None and parquet.is_parquet_name(j.shard.input) for j in jobs]
    if not any(on_data):
        yield from engine.imap(run_shard, jobs)
        return
    # lazy: start-up (`ctxtool redact` would load ctxtool.run.engines.ray)
    from .ray import RayEngine
    from .ray_parquet import run_shards

    assert isinstance(engine, RayEngine)
    data = run_shards(engine, [j for j, d in zip(jobs, on_data, strict=True) if d])
    rest = iter(engine.map(run_shard, [j for j, d in zip(jobs, on_data, strict=True) if not d]))
    yield from (next(data) if d else next(rest) for d in on_data)


@dataclass(slots=True)
class ShardedRun(FileRun[R]):
    """A :class:`~ctxtool.run.operation.FileRun` of shards: what each shard did, by which engine."""

    shards: list[dict[str, Any]] = field(default_factory=list)
    engine: str = ""


def _remove_tree(path: str) -> None:
    if urls.is_url(path):
        fs, p = urls.filesystem(path)
        fs.rm(p, recursive=True)
    else:
        shutil.rmtree(path, ignore_errors=True)
