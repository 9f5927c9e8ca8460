"""redact: a transcript with its secrets replaced by typed placeholders, to share it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from . import common
from .common import warn_skipped
from .console import err_line, out_line
from .exits import ExitCode
from .render import JsonlOpt, emit

if TYPE_CHECKING:
    from ..redact import RedactReport
    from ..redact.detect import RedactOptions

# the options export --redact and convert --redact share with redact (defined once, here)
SecretsFromOpt = Annotated[
    list[str] | None,
    common.path_option("--secrets-from", metavar="ENVFILE", help="Every value of this env file (KEY=VALUE lines) is a secret, wherever it appears (repeatable)."),
]
DenyOpt = Annotated[
    list[str] | None,
    typer.Option("--deny", metavar="REGEX", help="Matches of this regular expression are secrets (its first group when it has one; repeatable)."),
]
AllowOpt = Annotated[
    list[str] | None,
    typer.Option("--allow", metavar="REGEX", help="A value found that matches this regular expression is left alone (known false positives; repeatable)."),
]
DropBinaryOpt = Annotated[
    bool, typer.Option("--drop-binary", help="Replace base64 images and documents by a placeholder (default: kept, listed, not scanned).")
]
KeepSignaturesOpt = Annotated[
    bool,
    typer.Option("--keep-signatures", help="Keep thinking signatures and encrypted reasoning or compaction blobs (default: dropped: they cannot be verified after an edit)."),
]
RedactFlag = Annotated[
    bool,
    typer.Option("--redact", help="Replace secrets on the way out as `ctxtool redact` does (detect-secrets' plugins; --secrets-from adds env values)."),
]
#: finding lines shown before the rest is left to --json
SHOWN = 50


def options(secrets_from: list[str] | None = None, deny: list[str] | None = None, allow: list[str] | None = None,
            drop_binary: bool = False, keep_signatures: bool = False) -> RedactOptions:
    # lazy: start-up (`ctxtool --help` would load ctxtool.formats.base)
    from ..redact.detect import RedactOptions

    return RedactOptions(tuple(secrets_from or ()), tuple(deny or ()), tuple(allow or ()),
                         drop_binary=drop_binary, keep_signatures=keep_signatures)


def redact(
    paths: Annotated[list[str], typer.Argument(help="Transcript files (gzip/zstd too), directories (searched recursively) or - for stdin.", show_default=False)],
    output: Annotated[
        str | None,
        common.path_option("--output", "-o", help="Output file (default: stdout); with several inputs or a directory, a directory that gets each under its own name (a directory's files under their relative paths)."),
    ] = None,
    check: Annotated[
        bool, typer.Option("--check", help=f"Write nothing; exit {int(ExitCode.SECRETS)} when anything would be redacted (CI, pre-publish hooks).")
    ] = False,
    secrets_from: SecretsFromOpt = None,
    deny: DenyOpt = None,
    allow: AllowOpt = None,
    drop_binary: DropBinaryOpt = False,
    keep_signatures: KeepSignaturesOpt = False,
    fmt: common.FormatOpt = None,
    to: common.ToOpt = None,
    on_error: common.OnErrorOpt = common.OnError.fail,
    as_json: common.JsonOpt = False,
    as_jsonl: JsonlOpt = False,
) -> None:
    """Replace every secret with a typed placeholder ([REDACTED:aws-access-key#3], the same
    secret getting the same number in the run) in message text, thinking, tool arguments and
    outputs, file paths and the raw fields kept verbatim, in base64 and URL-encoded forms too.
    Detection: Yelp's detect-secrets plugins (cloud keys, tokens, private keys, JWTs, basic-auth
    URLs, keyword assignments, high-entropy strings) plus --secrets-from, --deny and --allow.
    The output is the same format with every id, pair and parent link kept. The report names
    each finding's kind, file, line, message and field, never the secret."""
    # lazy: start-up (`ctxtool --help` would load ctxtool.formats.base)
    from ..redact import redact_files

    machine = as_json or as_jsonl
    if check and output is not None:
        err_line("ctxtool: --check writes nothing: -o is ignored")
    opts = options(secrets_from, deny, allow, drop_binary, keep_signatures)
    rep = redact_files(paths, None if check else output, opts, check=check, fmt=fmt, to=to, on_error=on_error.value)
    for f in rep.files:
        warn_skipped(f.skipped)
    to_stderr = not check and (output is None or output == "-")
    totals = rep.totals()
    if machine:
        emit("redact", {"paths": list(paths), "output": None if check else output, "check": check},
             items=[t.to_json() for t in rep.items], tail={"totals": totals, "skipped": [s for f in rep.files for s in f.skipped]},
             jsonl=as_jsonl, to_stderr=to_stderr)
    else:
        for ln in _summary(rep, totals):
            (err_line if to_stderr else out_line)(ln)
    if check and totals["findings"]:
        raise typer.Exit(int(ExitCode.SECRETS))


def _summary(rep: RedactReport, totals: dict[str, Any]) -> list[str]:
    verb = "would replace" if rep.check else "replaced"
    kinds = ", ".join(f"{k} {v['secrets']}" for k, v in totals["kinds"].items() if v["secrets"])
    lines = [f"redact: {totals['transcripts']:,} transcript(s) in {totals['files']:,} file(s): {verb} "
             f"{totals['findings']:,} occurrence(s) of {totals['secrets']:,} secret(s)" + (f" ({kinds})" if kinds else "")]
    findings = rep.findings
    for f in findings[:SHOWN]:
        where = f"{f.file}:{f.line}" if f.line is not None else f.file
        msg = f" message {f.message}" if f.message is not None else ""
        lines.append(f"  {where}{msg} {f.field or '-'}: {f.placeholder}")
    if len(findings) > SHOWN:
        lines.append(f"  ... {len(findings) - SHOWN:,} more (--json lists them all)")
    if totals["binaries"]:
        what = "replaced" if totals["binaries_dropped"] else "kept, not scanned (--drop-binary replaces them)"
        lines.append(f"base64 images/documents: {totals['binaries']:,} {what}")
    if totals["signatures_dropped"]:
        lines.append(f"thinking signatures and encrypted blobs dropped: {totals['signatures_dropped']:,} (--keep-signatures keeps them)")
    if not rep.check:
        outs = sorted({f.output for f in rep.files if f.output and f.output != "-"})
        if len(outs) > 3:  # a directory's files
            lines.append(f"wrote {len(outs):,} files, {outs[0]} ... {outs[-1]}")
        elif outs:
            lines.append(f"wrote {', '.join(outs)}")
    return lines


def register(app: typer.Typer) -> None:
    app.command("redact")(redact)
