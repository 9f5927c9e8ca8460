"""``ctxtool redact``: a transcript with its secrets replaced by typed placeholders, for sharing
(:func:`redact_files`). Detection (:mod:`ctxtool.redact.detect`): detect-secrets' plugins,
env-file values, ``--deny`` and ``--allow``; each secret one placeholder per run
(``[REDACTED:aws-access-key#3]``). Replacement (:mod:`ctxtool.redact.core`): every string of the
raw records and of the model, in two passes; the output is the same format."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ..errors import CtxtoolError, Failure
from ..io import urls
from ..io.outputs import output_dir
from ..io.paths import refuse_overwrite_any
from ..model import Transcript
from ..run.operation import Operation, Results, RunContext, Task
from ..run.runner import run_file
from .core import Finding, Redactor, TranscriptRedaction
from .detect import RedactOptions


class _RedactTask(Task[Results[TranscriptRedaction]]):
    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self.results: Results[TranscriptRedaction] = Results()

    def apply(self, t: Transcript) -> None:
        self.results.items.append(self.redactor.redact(t))

    def finish(self) -> Results[TranscriptRedaction]:
        return self.results


@dataclass(frozen=True, eq=False)
class RedactOp(Operation[Results[TranscriptRedaction]]):
    """Redact every transcript of a file with a run's :class:`Redactor` (one process: the
    run's placeholders are numbered in one table)."""

    name: ClassVar[str] = "redact"
    parallel: ClassVar[bool] = False
    redactor: Redactor = field(default_factory=Redactor)

    def start(self, ctx: RunContext) -> Task[Results[TranscriptRedaction]]:
        return _RedactTask(self.redactor)


@dataclass(slots=True)
class FileRedaction:
    """One input file's redaction."""

    path: str
    output: str | None
    format: str | None
    transcripts: list[TranscriptRedaction]
    skipped: list[str]


@dataclass(slots=True)
class RedactReport:
    """What a run found and replaced (the secrets themselves are never in it)."""

    files: list[FileRedaction] = field(default_factory=list)
    check: bool = False
    secrets: int = 0  # distinct secrets (each with its placeholder)
    kinds: dict[str, int] = field(default_factory=dict)  # distinct secrets per kind

    @property
    def items(self) -> Iterator[TranscriptRedaction]:
        for f in self.files:
            yield from f.transcripts

    @property
    def findings(self) -> list[Finding]:
        return [x for t in self.items for x in t.findings]

    def totals(self) -> dict[str, Any]:
        found = Counter(x.kind for x in self.findings)
        items = list(self.items)
        return {
            "files": len(self.files),
            "transcripts": len(items),
            "findings": sum(found.values()),
            "secrets": self.secrets,
            "kinds": {k: {"secrets": self.kinds.get(k, 0), "findings": found.get(k, 0)}
                      for k in sorted(set(found) | set(self.kinds))},
            "binaries": sum(len(t.binaries) for t in items),
            "binaries_dropped": sum(1 for t in items for b in t.binaries if b.dropped),
            "signatures_dropped": sum(t.signatures_dropped for t in items),
            "lines_changed": sum(t.lines_changed for t in items),
        }


def input_files(paths: Sequence[str], output: str | None = None) -> list[tuple[str, str]]:
    """Each input file with the name its copy is written under: a file its own name, each
    transcript file of a directory its path relative to the directory (none under ``output``,
    the output directory: :func:`ctxtool.run.engines.shards.tree_files`)."""
    # lazy: start-up (loaded only when this runs: ..run.engines.shards)
    from ..run.engines.shards import tree_files

    out: list[tuple[str, str]] = []
    for p in paths:
        if _is_dir(p):
            out.extend(tree_files(p, output))
        else:
            out.append((p, Path(p).name))
    return out


def _is_dir(path: str) -> bool:
    import os

    return path != "-" and not urls.is_url(path) and os.path.isdir(path)


def output_paths(paths: Sequence[str], output: str | None, names: Sequence[str] | None = None,
                 tree: bool = False) -> list[str | None]:
    """Where each input's redacted copy goes: ``output`` itself for one input file (``-``/None:
    stdout); for several, or a directory's files (``tree``), ``output`` is a directory (made if
    missing) holding each under its own name (``names``, default each file's; two inputs of
    one name are refused)."""
    if len(paths) <= 1 and not tree:
        return [output or "-"]
    if output is None or output == "-":
        what = "a directory's files" if tree else "several inputs"
        raise CtxtoolError(f"{what}: -o names a directory to write their redacted copies into", kind=Failure.USAGE)
    out = Path(output)
    if tree and not (output.endswith("/") or out.is_dir()):  # as the commands run as shards
        raise CtxtoolError("a directory of transcripts is written as a directory: give -o DIR/", path=output,
                           kind=Failure.USAGE)
    if out.exists() and not out.is_dir():
        raise CtxtoolError("several inputs: -o must be a directory", kind=Failure.USAGE, path=output)
    names = list(names) if names is not None else [Path(p).name for p in paths]
    dup = next((n for n in names if names.count(n) > 1 or n in ("", "-")), None)
    if dup is not None:
        raise CtxtoolError(f"several inputs named {dup or '-'!r}: write them one at a time", kind=Failure.USAGE)
    outs = [str(out / n) for n in names]
    refuse_overwrite_any(paths, outs)  # before any is written
    for n in names:
        output_dir((out / n).parent)
    return list(outs)


def redact_files(
    paths: Sequence[str],
    output: str | None = None,
    options: RedactOptions | None = None,
    *,
    check: bool = False,
    fmt: str | None = None,
    to: str | None = None,
    on_error: str = "fail",
) -> RedactReport:
    """``ctxtool redact``: each file of ``paths`` (a directory: each of its transcript files)
    written with its secrets replaced (to ``output``: a file, ``-`` for stdout, or a directory
    for several inputs or a directory's, see :func:`output_paths`), one table of placeholders
    for the whole run. ``check``: nothing written (the report says what would be replaced)."""
    inputs = input_files(paths, None if check or output is None or output == "-" else output.rstrip("/"))
    files = [f for f, _ in inputs]
    tree = any(_is_dir(p) for p in paths)
    outs: list[str | None] = ([None] * len(files) if check
                              else output_paths(files, output, [n for _, n in inputs], tree))
    report = RedactReport(check=check)
    with Redactor(options) as r:
        op = RedactOp(r)
        for p, out in zip(files, outs, strict=True):
            run = run_file(op, p, out, fmt=fmt, to=to, on_error=on_error, jobs=1)
            report.files.append(FileRedaction(p, out, run.format, run.report.items, run.skipped))
        report.secrets = len(r.secrets)
        report.kinds = dict(Counter(r.secrets.kind_of.values()))
    return report


def redacted(transcripts: Iterable[Transcript], redactor: Redactor) -> Iterator[Transcript]:
    """``transcripts`` each redacted in place as it passes (``export --redact``)."""
    for t in transcripts:
        redactor.redact(t)
        yield t
