"""Parquet datasets (a file, a directory of shards in the Hugging Face layout, or an fsspec URL):
one transcript per row, its conversation one column (``--messages-column``, else found). A file
runs as the JSON Lines dataset it stands for, its output written row group by row group with
every other column kept; a directory runs as shards. Needs pyarrow, imported only for a Parquet
input. How and why: docs/architecture.md, "Running, in more detail"."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import CtxtoolError, Failure
from ..formats.base import META_KEY
from . import jsonl as jsonio
from . import urls
from .files import input_size
from .outputs import atomic_output
from .parquet_paths import SUFFIX as SUFFIX
from .parquet_paths import is_parquet as is_parquet
from .parquet_paths import is_parquet_dir as is_parquet_dir
from .parquet_paths import is_parquet_name as is_parquet_name
from .parquet_paths import shard_files as shard_files
from .paths import refuse_overwrite

if TYPE_CHECKING:
    from ..run.operation import FileRun, Operation, R
    from .events import EventLog

#: record keys that may name the row's id (in reports): the first one present is sent along
ID_COLUMNS = ("instance_id", "id", "conversation_id", "uuid")
#: the struct fields that make a list-of-structs column a conversation
ROLE_FIELDS = ("role", "from")
#: rows turned into Python objects at once (a trajectory can be megabytes of JSON)
BATCH_ROWS = 64
#: bytes read from a Parquet file at a time
READ_BUFFER = 1 << 20


def import_pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401
    except ImportError as e:
        raise CtxtoolError("Parquet datasets need pyarrow: pip install 'ctxtool[parquet]'", kind=Failure.USAGE) from e
    return pyarrow


@dataclass(frozen=True, slots=True)
class Column:
    """The conversation column: its name, ``list`` (a list of structs) or ``json`` (a JSON
    string), the key its record puts it under, and the id column sent along (if any)."""

    name: str
    kind: str
    key: str
    id_column: str | None = None


def find_column(schema: Any, name: str | None, path: str) -> Column:
    """The conversation column of an Arrow ``schema``: ``name``, else found (see the module)."""
    # lazy: start-up (loaded only when this runs: ..formats.dataset)
    from ..formats.dataset import MESSAGE_KEYS

    pa = import_pyarrow()
    kinds = {f.name: _kind(pa, f.type) for f in schema}
    if name is not None:
        if name not in kinds:
            raise CtxtoolError(f"no column {name!r} (columns: {', '.join(kinds)})", path=path, kind=Failure.USAGE)
        if kinds[name] is None:
            raise CtxtoolError(f"column {name!r} is {schema.field(name).type}: the messages column must be a list of "
                               "structs or a JSON string", path=path, kind=Failure.USAGE)
        chosen = name
    else:
        named = [k for k in MESSAGE_KEYS if kinds.get(k) is not None]
        convs = [f.name for f in schema if kinds[f.name] == "list" and _has_role(pa, f.type)]
        if named:
            chosen = named[0]
        elif len(convs) == 1:
            chosen = convs[0]
        else:
            raise CtxtoolError("cannot tell which column holds the conversation: name it with --messages-column "
                               f"(columns: {', '.join(kinds)})", path=path, kind=Failure.USAGE)
    key = chosen if chosen in MESSAGE_KEYS else "messages"
    ids = [c for c in ID_COLUMNS if c in kinds and c != chosen and _scalar_id(pa, schema.field(c).type)]
    return Column(chosen, str(kinds[chosen]), key, ids[0] if ids else None)


def _kind(pa: Any, t: Any) -> str | None:
    if (pa.types.is_list(t) or pa.types.is_large_list(t)) and pa.types.is_struct(t.value_type):
        return "list"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "json"
    return None


def _has_role(pa: Any, t: Any) -> bool:
    names = {t.value_type.field(i).name for i in range(t.value_type.num_fields)}
    return any(r in names for r in ROLE_FIELDS)


def _scalar_text(pa: Any, t: Any) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t))


def _scalar_id(pa: Any, t: Any) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_integer(t))


def _open(path: str) -> Any:
    """A ``pyarrow.parquet.ParquetFile`` of ``path`` (local or URL); a file that is not
    Parquet is one line naming it."""
    pa = import_pyarrow()
    try:
        src: Any = urls.open_read(path) if urls.is_url(path) else urls.local(path)
        # read as needed (no pre-buffering of a whole row group's column chunks), through a buffer
        return pa.parquet.ParquetFile(src, pre_buffer=False, buffer_size=READ_BUFFER)
    except CtxtoolError:
        raise
    except FileNotFoundError as e:
        raise CtxtoolError("no such file", path=path, kind=Failure.NOT_FOUND) from e
    except (OSError, pa.ArrowException) as e:
        raise CtxtoolError(f"not a readable Parquet file: {e}", path=path, kind=Failure.INPUT) from e


def _drop_nulls(v: Any) -> Any:
    """A struct's null fields left out (a list of structs has every field on every message:
    null where the message has none), so a message reads as it was written."""
    if isinstance(v, dict):
        return {k: _drop_nulls(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_drop_nulls(x) for x in v]
    return v


def _message_in(m: Any) -> Any:
    """A message of a list-of-structs column as its record holds it: ctxtool's own field
    (what restore needs) is JSON text in the column."""
    m = _drop_nulls(m)
    if isinstance(m, dict) and isinstance(m.get(META_KEY), str):
        m[META_KEY] = jsonio.loads(m[META_KEY])
    return m


def _message_out(m: Any) -> Any:
    if isinstance(m, dict) and META_KEY in m and not isinstance(m[META_KEY], str | None):
        m = dict(m)
        m[META_KEY] = jsonio.dumps(m[META_KEY]).decode("utf-8", "surrogatepass")
    return m


def _output_type(pa: Any, t: Any, meta: bool) -> Any:
    """The conversation column's type for the output: ctxtool's own message field added as a
    string when the output holds it, and left out when the output no longer does (restore
    gives back the type the column had)."""
    fields = [t.value_type.field(i) for i in range(t.value_type.num_fields)]
    names = [f.name for f in fields]
    if meta and META_KEY not in names:
        fields.append(pa.field(META_KEY, pa.large_string() if pa.types.is_large_list(t) else pa.string()))
    elif not meta and META_KEY in names and _scalar_text(pa, fields[names.index(META_KEY)].type):
        del fields[names.index(META_KEY)]
    else:
        return t
    item = pa.field(t.value_field.name, pa.struct(fields), t.value_field.nullable)
    return pa.large_list(item) if pa.types.is_large_list(t) else pa.list_(item)


def _records(tables: Iterable[Any], col: Column) -> Iterator[bytes]:
    """Each row's record (one JSON line) of a stream of Arrow tables (a file's batches, Ray
    Data's blocks), :data:`BATCH_ROWS` rows at a time as Python objects."""
    for tbl in tables:
        for off in range(0, tbl.num_rows, BATCH_ROWS):
            part = tbl.slice(off, BATCH_ROWS)
            ids = part.column(col.id_column).to_pylist() if col.id_column else None
            values = part.column(col.name).to_pylist()
            if col.kind == "json":
                for k, text in enumerate(values):
                    raw = b"null" if text is None else text.encode("utf-8", "surrogatepass")
                    spaced = _spaced(raw)
                    yield _head(col, spaced) + raw + _tail(col, None if ids is None else ids[k], spaced)
            else:
                for k, msgs in enumerate(values):
                    rec: dict[str, Any] = {col.key: None if msgs is None else [_message_in(m) for m in msgs]}
                    if ids is not None and ids[k] is not None:
                        rec[str(col.id_column)] = ids[k]
                    yield jsonio.dumps(rec)
            del part, values


def _row_groups(pf: Any, columns: list[str], groups: bool) -> Iterator[Any]:
    """``columns`` in row order: batches of :data:`BATCH_ROWS` rows, or (``groups``) whole row groups."""
    if not groups:
        yield from pf.iter_batches(batch_size=BATCH_ROWS, columns=columns)
        return
    for g in range(pf.num_row_groups):
        yield pf.read_row_group(g, columns=columns)


def columns_read(col: Column) -> list[str]:
    """The columns a row's record is made of: the conversation and the id sent along."""
    return [col.name] + ([col.id_column] if col.id_column else [])


def _spaced(text: bytes) -> bool:
    """Whether a JSON text separates as Python's json.dumps does (``": "``, ``", "``)."""
    head = text[:400]
    return b'": ' in head or b'", "' in head


def _head(col: Column, spaced: bool) -> bytes:
    return b'{"%s":%s' % (col.key.encode(), b" " if spaced else b"")


def _tail(col: Column, rid: Any, spaced: bool) -> bytes:
    """The rest of a record after its conversation, in the conversation's style (so that a
    record written again keeps the style the text had)."""
    if rid is None:
        return b"}"
    sep, colon = (b", ", b": ") if spaced else (b",", b":")
    return b'%s"%s"%s%s}' % (sep, str(col.id_column).encode(), colon, jsonio.dumps(rid))


def _value(line: bytes, col: Column, path: str, row: int, rid: Any = None) -> Any:
    """The conversation of an output record, as its column holds it (a JSON string: the
    bytes the run wrote for it, as a record kept or restored has them)."""
    line = line.rstrip(b"\r\n")
    if col.kind == "json":
        for spaced in (False, True):
            head, tail = _head(col, spaced), _tail(col, rid, spaced)
            if line.startswith(head) and line.endswith(tail) and len(line) > len(head) + len(tail):
                raw = line[len(head):len(line) - len(tail)]
                return None if raw == b"null" else raw.decode("utf-8", "surrogatepass")
    rec = jsonio.loads(line, path=path, line=row)
    msgs = rec.get(col.key) if isinstance(rec, dict) else None
    if col.kind == "json":
        return None if msgs is None else jsonio.dumps(msgs).decode("utf-8", "surrogatepass")
    return [_message_out(m) for m in msgs] if isinstance(msgs, list) else msgs


def _column(pa: Any, values: list[Any], field: Any, path: str, first_row: int) -> Any:
    """``values`` as an Arrow array of the column's type; a message field the type lacks is an
    error (it would be lost), naming the row."""
    if pa.types.is_struct(getattr(field.type, "value_type", None) or pa.null()):
        for k, v in enumerate(values):
            extra = _extra_fields(pa, v, field.type)
            if extra:
                raise CtxtoolError(f"the new conversation has field {extra!r}, which column {field.name!r} "
                                   f"({field.type}) lacks: use a JSON string column", path=path, line=first_row + k,
                                   kind=Failure.INPUT)
    try:
        return pa.array(values, type=field.type)
    except (pa.ArrowException, TypeError, ValueError) as e:
        raise CtxtoolError(f"the new conversations do not fit column {field.name!r} ({field.type}): {e}",
                           path=path, kind=Failure.INPUT) from e


def _extra_fields(pa: Any, v: Any, t: Any) -> str | None:
    if v is None:
        return None
    if pa.types.is_struct(t) and isinstance(v, dict):
        names = {t.field(i).name: t.field(i).type for i in range(t.num_fields)}
        for k, x in v.items():
            if k not in names:
                return str(k)
            extra = _extra_fields(pa, x, names[k])
            if extra:
                return f"{k}.{extra}"
    elif (pa.types.is_list(t) or pa.types.is_large_list(t)) and isinstance(v, list):
        for x in v:
            extra = _extra_fields(pa, x, t.value_type)
            if extra:
                return extra
    return None


def _skipped_rows(errors: list[CtxtoolError]) -> set[int]:
    return {e.line for e in errors if e.line is not None}


def output_schema(schema: Any, col: Column, out_jsonl: str) -> Any:
    """The input's schema, the conversation column typed for what the run wrote (``out_jsonl``)."""
    if col.kind != "list":
        return schema
    pa = import_pyarrow()
    with open(out_jsonl, "rb") as fh:
        meta = any(b'"%s":' % META_KEY.encode() in line for line in fh)
    idx = schema.get_field_index(col.name)
    return schema.set(idx, schema.field(idx).with_type(_output_type(pa, schema.field(idx).type, meta)))


def replaced(tables: Iterable[Any], col: Column, schema: Any, out_jsonl: str, skipped: set[int],
             path: str) -> Iterator[Any]:
    """Each input table (a row group, a block: every column but the conversation) with the
    run's conversations put in (``out_jsonl``: one line per row the run kept; a row in
    ``skipped`` is left out), as an Arrow table of ``schema``; the new column built
    :data:`BATCH_ROWS` rows at a time."""
    pa = import_pyarrow()
    idx = schema.get_field_index(col.name)
    field = schema.field(idx)
    row = 0
    with open(out_jsonl, "rb") as fh:
        for tbl in tables:
            ids = tbl.column(col.id_column).to_pylist() if col.id_column and col.kind == "json" else None
            keep: list[int] = []
            chunks: list[Any] = []
            values: list[Any] = []
            for k in range(tbl.num_rows):
                row += 1
                if row in skipped:
                    continue
                line = fh.readline()
                if not line:
                    raise CtxtoolError("the run wrote fewer records than the input has rows", path=path)
                keep.append(k)
                values.append(_value(line, col, path, row, None if ids is None else ids[k]))
                if len(values) == BATCH_ROWS:
                    chunks.append(_column(pa, values, field, path, row - len(values) + 1))
                    values = []
            if values:
                chunks.append(_column(pa, values, field, path, row - len(values) + 1))
            if len(keep) < tbl.num_rows:
                tbl = tbl.take(pa.array(keep, type=pa.int64()))
            tbl = tbl.add_column(idx, field, pa.chunked_array(chunks, type=field.type))
            yield tbl if tbl.schema.equals(schema, check_metadata=True) else tbl.cast(schema)
            del tbl, chunks, values
        if fh.readline():
            raise CtxtoolError("the run wrote more records than the input has rows", path=path)


def compression(pf: Any, col: Column) -> str:
    """The conversation column's codec (the output is written with it)."""
    meta = pf.metadata
    idx = pf.schema_arrow.get_field_index(col.name)
    c = meta.row_group(0).column(idx).compression.lower() if meta.num_row_groups else "snappy"
    return c if c != "uncompressed" else "none"


def _write(tables: Iterator[Any], schema: Any, codec: str, dest: str) -> None:
    """The output Parquet file, a row group per table, written atomically."""
    pa = import_pyarrow()

    def readable(tmp: str) -> None:
        pa.parquet.ParquetFile(tmp).metadata  # noqa: B018  (a footer that reads back)

    with atomic_output(dest, readable) as out:
        writer = pa.parquet.ParquetWriter(out, schema, compression=codec)
        try:
            for tbl in tables:
                writer.write_table(tbl, row_group_size=max(1, tbl.num_rows))
        finally:
            writer.close()


@dataclass(slots=True)
class TableRun:
    """A run over a Parquet file's rows, and its output's tables (valid inside :func:`run_tables`)."""

    run: FileRun[Any]
    tables: Iterator[Any] | None = None
    schema: Any = None


@contextlib.contextmanager
def run_tables(
    op: Operation[R],
    path: str,
    col: Column,
    schema: Any,
    tables: Callable[[list[str], bool], Iterable[Any]],
    *,
    write: bool = False,
    fmt: str | None = None,
    on_error: str = "fail",
    events: EventLog | None = None,
    progress: Callable[[Any], None] | None = None,
    threads: int = 1,
    runner: Callable[..., FileRun[R]],
) -> Iterator[TableRun]:
    """``op`` over the rows of the Parquet file ``path`` (its Arrow ``schema``), read in row
    order as Arrow tables: ``tables(columns, groups)`` gives a new stream of them at each call,
    of those columns: once for the records (the conversation and the id), and once for the
    output (``write``: every other column; ``groups``: in the row groups to write). The
    process holds a table and :data:`BATCH_ROWS` rows as Python objects at a time, whatever
    the file's size; the rows' records wait in a temporary JSON Lines file, run by ``runner``
    (:func:`ctxtool.run.runner.run_file`)."""
    # lazy: start-up (loaded only when this runs: tempfile)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="ctxtool-parquet-") as tmp:
        src = os.path.join(tmp, "rows.jsonl")
        with open(src, "wb") as fh:
            for rec in _records(tables(columns_read(col), False), col):
                fh.write(rec)
                fh.write(b"\n")
        dst = os.path.join(tmp, "out.jsonl") if write else None
        # one process per file (its rows are named by the Parquet file); shards run in parallel
        run = runner(op, src, dst, fmt=fmt, on_error=on_error, jobs=1, events=events, progress=progress,
                        threads=threads, name=path)
        os.unlink(src)
        if dst is None:
            yield TableRun(run)
            return
        out = output_schema(schema, col, dst)
        others = [n for n in schema.names if n != col.name]  # the conversation comes from the run
        yield TableRun(run, replaced(tables(others, True), col, out, dst, _skipped_rows(run.errors), path), out)


def run_file(
    op: Operation[R],
    path: str,
    output: str | None = None,
    *,
    column: str | None = None,
    fmt: str | None = None,
    to: str | None = None,
    on_error: str = "fail",
    events: EventLog | None = None,
    progress: Callable[[Any], None] | None = None,
    threads: int = 1,
    runner: Callable[..., FileRun[R]],
) -> FileRun[R]:
    """:func:`ctxtool.run.runner.run_file` over one Parquet file ``path`` (local or URL), its
    output a Parquet file ``output`` (a directory: the same name inside it); ``runner``: the runner
    of the rows' JSON Lines (``run_file`` itself)."""
    if to is not None:
        raise CtxtoolError("a Parquet dataset is written as Parquet: --to does not apply", kind=Failure.USAGE)
    if is_parquet_dir(path):
        raise CtxtoolError("a directory of Parquet shards runs as shards: give -o DIR/ (or --engine)",
                           path=path, kind=Failure.USAGE)
    if output == "-":
        raise CtxtoolError("a Parquet dataset is not written to stdout: give -o FILE.parquet", kind=Failure.USAGE)
    if output is not None and (output.endswith("/") or (not urls.is_url(output) and os.path.isdir(output))):
        output = urls.join(output, path.rstrip("/").rsplit("/", 1)[-1])
    pf = _open(path)
    col = find_column(pf.schema_arrow, column, path)
    with run_tables(op, path, col, pf.schema_arrow, lambda columns, groups: _row_groups(pf, columns, groups),
                    write=output is not None, fmt=fmt, on_error=on_error, events=events, progress=progress,
                    threads=threads, runner=runner) as done:
        if output is not None and done.tables is not None:
            refuse_overwrite(path, output)
            _write(done.tables, done.schema, compression(pf, col), output)
    run: FileRun[R] = done.run
    run.path = path
    run.output = output
    run.file_bytes_before = input_size(path)
    run.file_bytes_after = input_size(output) if output is not None else None
    return run
