"""The bad-input suite's engine: seeded mutations of real transcripts, run through every
command in this process, each outcome classified.

A case is (base file, mutation, command). What it must show, whatever the bytes:
- no ``internal error`` and no traceback (exit 1 is reserved for bugs);
- a failure is one ``ctxtool: error:`` line that names the input file;
- the input is unchanged, and a failed command leaves nothing at its ``-o`` path and no
  temporary file beside it.

Used by ``tests/test_bad_input.py`` (a fixed seed, run in CI) and runnable by hand for a
larger count: ``python tests/badinput.py --cases 20000 --seed 7``.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import random
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"
CORPUS = ROOT.parent / "shared" / "corpus"

#: the largest part of a real file a case starts from: mutations of a megabyte document
#: cost time without finding more (the head keeps the file's own structure and bytes)
HEAD_BYTES = 48_000

#: every command that reads a transcript, as argv templates ({in}: input, {out}: output)
COMMANDS: list[list[str]] = [
    ["stats", "{in}"],
    ["stats", "--json", "{in}"],
    ["validate", "{in}"],
    ["convert", "{in}", "--to", "ctxtool", "-o", "{out}"],
    ["convert", "{in}", "--to", "openai", "-o", "{out}"],
    ["truncate", "{in}", "-o", "{out}"],
    ["trim", "{in}", "--budget", "400", "-o", "{out}"],
    ["restore", "{in}", "-o", "{out}"],
    ["cut", "{in}"],
    ["check", "{in}", "--context-window", "4000"],
    ["window", "{in}", "--max-messages", "3", "-o", "{out}"],
    ["archive", "{in}", "-o", "{out}"],
    ["repair", "{in}", "-o", "{out}"],
    ["replay", "{in}", "--json", "--context-window", "4000"],
    ["compact", "{in}", "--force", "--keep-recent-tokens", "200", "-o", "{out}"],
]

#: commands that read many files (a user's sessions), each run over a directory of mutated
#: files with ``-j 2`` (whole files on worker processes) and ``-j 1``: the same outcome
MANY_COMMANDS: list[list[str]] = [
    ["stats", "--json", "--on-error", "skip"],
    ["usage", "--json", "-z", "UTC"],
    ["validate", "--json"],
    ["check", "--json", "--on-error", "skip", "--context-window", "4000"],
    ["cut", "--json", "--on-error", "skip"],
    ["compactions", "--json"],
]

#: a many-files case holds at least this many bytes (more than the pool's threshold,
#: ctxtool.run.manyfiles.FILES_MIN_BYTES)
MANY_BYTES = 1_300_000

#: what no output for people may carry (an escape sequence would reach the terminal; JSON
#: escapes these, so it never carries them either): C0 controls but tab and newline, DEL
CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f]")

#: exit statuses a command may end with on bad or odd input (1 is a bug; see the README)
ALLOWED = {0, 2, 3, 4, 5, 6, 7, 8}


def base_files() -> list[Path]:
    files = sorted(p for p in SAMPLES.glob("*") if p.suffix in (".json", ".jsonl"))
    if CORPUS.is_dir():
        files += sorted(p for p in CORPUS.rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl", ".traj"))
    return files


def head(p: Path) -> bytes:
    """The file, or for a large one its first lines (JSONL) or first items (a JSON array)."""
    data = p.read_bytes()
    if len(data) <= HEAD_BYTES:
        return data
    if data.lstrip()[:1] == b"[":
        try:
            doc = json.loads(data)
        except ValueError:
            return data[:HEAD_BYTES]
        keep: list[object] = []
        for item in doc:
            keep.append(item)
            if len(json.dumps(keep)) > HEAD_BYTES:
                break
        return json.dumps(keep, indent=2, ensure_ascii=False).encode()
    if data.lstrip()[:1] == b"{" and b"\n{" not in data[:HEAD_BYTES]:
        return data  # one JSON document: a head would not be one
    cut = data.rfind(b"\n", 0, HEAD_BYTES)
    return data[: cut + 1] if cut > 0 else data


# -- mutations --------------------------------------------------------------------------
WRONG_VALUES: list[object] = [None, 0, -1, 1.5, "", "x", [], {}, True, [1, "a"], {"a": None}]
#: text that a terminal renderer could read as its own: rich markup, emoji codes, escapes
NAME_KEYS = {"name", "id", "tool_name", "toolName", "model", "title", "call_id", "tool_call_id", "tool_use_id",
             "sessionId", "session_id", "uuid"}
MARKUP_TEXTS = ["[/b]", "[bold]x", "x[/y]z", ":smile:", "\u001b[31mred\u001b[0m", "a\rb", "[link=file:///etc]x[/link]"]
NUMBER_TEXTS = [
    "9" * 5000,  # beyond Python's int string limit
    "123456789012345678901234567891",
    "1e999",
    "-1e999",
    "Infinity",
    "NaN",
    "-0.000005",
    "1E-400",
]


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def _paths(obj: object, prefix: tuple[object, ...] = ()) -> Iterator[tuple[object, ...]]:
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, (*prefix, i))


def _replace_value(data: bytes, rng: random.Random, make: Callable[[random.Random], str]) -> bytes:
    """Parse one JSON line (or the document), replace a random value with raw JSON text."""
    lines = _lines(data)
    idx = [i for i, ln in enumerate(lines) if ln.strip()[:1] in (b"{", b"[")]
    targets = [(i, lines[i]) for i in idx] if len(idx) > 1 else [(-1, data)]
    i, text = rng.choice(targets)
    try:
        obj = json.loads(text)
    except ValueError:
        return data + b"\n" + make(rng).encode()
    paths = [p for p in _paths(obj) if p]
    if not paths:
        new = make(rng)
    else:
        path = rng.choice(paths)
        marker = "\u0000CTXTOOL-MARK\u0000"
        parent: object = obj
        for k in path[:-1]:
            parent = parent[k]  # type: ignore[index]
        parent[path[-1]] = marker  # type: ignore[index]
        new = json.dumps(obj, ensure_ascii=False).replace(json.dumps(marker), make(rng))
    if i < 0:
        return new.encode()
    lines[i] = new.encode()
    return b"\n".join(lines)


def m_truncate(data: bytes, rng: random.Random) -> bytes:
    return data[: rng.randrange(0, max(1, len(data)))]


def m_flip(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        if b:
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
    return bytes(b)


def m_bom(data: bytes, rng: random.Random) -> bytes:
    return b"\xef\xbb\xbf" + data


def m_crlf(data: bytes, rng: random.Random) -> bytes:
    return data.replace(b"\n", b"\r\n")


def m_utf16(data: bytes, rng: random.Random) -> bytes:
    return data.decode("utf-8", "replace").encode(rng.choice(["utf-16", "utf-16-le", "utf-16-be"]))


def m_wrong_type(data: bytes, rng: random.Random) -> bytes:
    return _replace_value(data, rng, lambda r: json.dumps(r.choice(WRONG_VALUES)))


def m_null_bytes(data: bytes, rng: random.Random) -> bytes:
    pos = rng.randrange(0, max(1, len(data)))
    return data[:pos] + b"\x00" * rng.randint(1, 4) + data[pos:]


def m_huge_number(data: bytes, rng: random.Random) -> bytes:
    return _replace_value(data, rng, lambda r: r.choice(NUMBER_TEXTS))


def m_deep(data: bytes, rng: random.Random) -> bytes:
    depth = rng.choice([1_000, 100_000])
    return _replace_value(data, rng, lambda r: "[" * depth + "]" * depth)


def m_lines(data: bytes, rng: random.Random) -> bytes:
    lines = _lines(data)
    if len(lines) < 2:
        return data + b"\n" + data
    op = rng.choice(["drop", "dup", "swap", "garbage"])
    i = rng.randrange(len(lines))
    if op == "drop":
        del lines[i]
    elif op == "dup":
        lines.insert(i, lines[i])
    elif op == "swap":
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    else:
        lines.insert(i, rng.choice([b"garbage", b"{", b"[1,2", b"null", b"42", b'"text"', b"{}"]))
    return b"\n".join(lines)


def m_markup(data: bytes, rng: random.Random) -> bytes:
    """A string value (a tool name, an id, a text...) replaced by text a renderer could
    mistake for its own markup: what ctxtool prints must show it as it is."""
    lines = _lines(data)
    idx = [i for i, ln in enumerate(lines) if ln.strip()[:1] in (b"{", b"[")]
    i = rng.choice(idx) if len(idx) > 1 else -1
    try:
        obj = json.loads(lines[i] if i >= 0 else data)
    except ValueError:
        return data
    strings = [p for p in _paths(obj) if p and isinstance(_at(obj, p), str)]
    names = [p for p in strings if p[-1] in NAME_KEYS]  # what tables show: names, ids
    if not strings:
        return data
    for path in names if names and rng.random() < 0.8 else [rng.choice(strings)]:
        parent: object = obj
        for k in path[:-1]:
            parent = parent[k]  # type: ignore[index]
        parent[path[-1]] = rng.choice(MARKUP_TEXTS)  # type: ignore[index]
    new = json.dumps(obj, ensure_ascii=False).encode()
    if i < 0:
        return new
    lines[i] = new
    return b"\n".join(lines)


def _at(obj: object, path: tuple[object, ...]) -> object:
    for k in path:
        obj = obj[k]  # type: ignore[index]
    return obj


def m_empty(data: bytes, rng: random.Random) -> bytes:
    return rng.choice([b"", b"\n\n", b"   ", b"\xef\xbb\xbf", b"{}", b"[]", b"null"])


MUTATIONS: dict[str, Callable[[bytes, random.Random], bytes]] = {
    "truncate": m_truncate,
    "flip": m_flip,
    "bom": m_bom,
    "crlf": m_crlf,
    "utf16": m_utf16,
    "wrong-type": m_wrong_type,
    "nul": m_null_bytes,
    "huge-number": m_huge_number,
    "deep": m_deep,
    "lines": m_lines,
    "empty": m_empty,
    "markup": m_markup,
}


# -- running ----------------------------------------------------------------------------
@dataclass
class Outcome:
    case: str
    argv: list[str]
    code: int
    stderr: str
    problems: list[str] = field(default_factory=list)


@dataclass
class Tally:
    cases: int = 0
    exits: Counter[int] = field(default_factory=Counter)
    tracebacks: int = 0
    internal_errors: int = 0
    inputs_modified: int = 0
    partial_outputs: int = 0
    unnamed_errors: int = 0
    controls: int = 0
    failures: list[Outcome] = field(default_factory=list)

    def summary(self) -> str:
        exits = ", ".join(f"{k}: {v}" for k, v in sorted(self.exits.items()))
        return (
            f"{self.cases} cases (exit statuses {exits}); tracebacks {self.tracebacks}, internal errors "
            f"{self.internal_errors}, inputs modified {self.inputs_modified}, partial outputs "
            f"{self.partial_outputs}, errors not naming the file {self.unnamed_errors}, "
            f"control characters printed {self.controls}"
        )


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """Run ``ctxtool argv`` in this process: (exit status, stderr, stdout)."""
    from ctxtool.cli import main

    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    err = io.StringIO()
    stdin = io.TextIOWrapper(io.BytesIO(b""), encoding="utf-8")
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        old_in, sys.stdin = sys.stdin, stdin
        try:
            code = main(argv)
        except SystemExit as e:  # pragma: no cover - main returns, it does not exit
            code = int(e.code or 0)
        finally:
            sys.stdin = old_in
    out.flush()
    return code, err.getvalue(), out.buffer.getvalue().decode("utf-8", "replace")  # type: ignore[attr-defined]


def cases(seed: int, count: int) -> Iterator[tuple[str, str, bytes, list[str]]]:
    """(case id, file name, mutated bytes, command) for ``count`` cases; the command rotates
    so that every command sees every kind of mutation."""
    rng = random.Random(seed)
    bases = [(p, head(p)) for p in base_files()]
    names = list(MUTATIONS)
    for k in range(count):
        p, data = bases[k % len(bases)]
        mname = names[(k // len(bases)) % len(names)]
        mutated = MUTATIONS[mname](data, rng)
        cmd = COMMANDS[(k * 7 + k // len(COMMANDS)) % len(COMMANDS)]
        yield f"{k}:{p.name}:{mname}:{cmd[0]}", p.name, mutated, cmd


def run_case(case: str, name: str, data: bytes, cmd: list[str], work: Path, tally: Tally) -> None:
    d = work / case.split(":")[0]
    d.mkdir(parents=True, exist_ok=True)
    inp = d / name
    inp.write_bytes(data)
    out = d / "out" / ("result" + Path(name).suffix)
    out.parent.mkdir()
    argv = [a.replace("{in}", str(inp)).replace("{out}", str(out)) for a in cmd]
    before = hashlib.sha256(data).hexdigest()
    code, err, stdout = run_cli(argv)
    o = Outcome(case, argv, code, err)
    _judge(o, tally, [(code, err, stdout)])
    if hashlib.sha256(inp.read_bytes()).hexdigest() != before:
        tally.inputs_modified += 1
        o.problems.append("input modified")
    leftovers = list(out.parent.iterdir())
    if code not in (0, 4, 5) and leftovers:
        tally.partial_outputs += 1
        o.problems.append(f"left {[p.name for p in leftovers]}")
    if code in (2, 3, 7, 8):
        errors = [ln for ln in err.splitlines() if ln.startswith("ctxtool: error:")]
        if len(errors) != 1 or name not in errors[0]:
            tally.unnamed_errors += 1
            o.problems.append("error line does not name the file")
    if o.problems:
        tally.failures.append(o)


def _judge(o: Outcome, tally: Tally, runs: list[tuple[int, str, str]]) -> None:
    """What every case must show, over each run of its command (exit status, stderr,
    stdout): no traceback, no internal error, an allowed exit status (the first run's), no
    control character printed."""
    code = runs[0][0]
    tally.cases += 1
    tally.exits[code] += 1
    if any("Traceback" in err for _, err, _ in runs):
        tally.tracebacks += 1
        o.problems.append("traceback")
    if any("internal error" in err or c == 1 for c, err, _ in runs):
        tally.internal_errors += 1
        o.problems.append("internal error")
    if code not in ALLOWED:
        o.problems.append(f"exit {code}")
    if any(CONTROLS.search(err) or CONTROLS.search(out) for _, err, out in runs):
        tally.controls += 1
        o.problems.append("a control character reached the terminal")


def many_cases(seed: int, count: int) -> Iterator[tuple[str, list[tuple[str, bytes]], list[str]]]:
    """(case id, files, command) for ``count`` many-files cases: real files, half of them
    mutated, until MANY_BYTES; the command rotates through MANY_COMMANDS."""
    rng = random.Random(seed)
    bases = [(p, head(p)) for p in base_files()]
    names = list(MUTATIONS)
    for k in range(count):
        files: list[tuple[str, bytes]] = []
        size = 0
        while size < MANY_BYTES:
            p, data = bases[rng.randrange(len(bases))]
            if rng.random() < 0.5:
                data = MUTATIONS[rng.choice(names)](data, rng)
            files.append((f"{len(files):03}_{p.name}", data))
            size += len(data)
        cmd = MANY_COMMANDS[k % len(MANY_COMMANDS)]
        yield f"many{k}:{cmd[0]}", files, cmd


def run_many_case(case: str, files: list[tuple[str, bytes]], cmd: list[str], work: Path, tally: Tally) -> None:
    """One directory of files through ``cmd`` with ``-j 2`` and ``-j 1``: besides the
    checks of :func:`run_case`, the exit status, stderr and stdout must be the same (after
    an error, stdout with ``-j 2`` may stop sooner: the results of the files before the
    failing one)."""
    d = work / case.split(":")[0]
    d.mkdir(parents=True, exist_ok=True)
    for name, data in files:
        (d / name).write_bytes(data)
    runs = [run_cli([*cmd, "-j", str(j), str(d)]) for j in (2, 1)]
    code, err, _ = runs[0]
    o = Outcome(case, [*cmd, "-j", "2", str(d)], code, err)
    _judge(o, tally, runs)
    # stopped by an error, one process may have shown the failing file's first transcripts
    # (it streams them), a worker's file comes whole or not at all: the same up to there
    same_out = runs[0][2] == runs[1][2] if code in (0, 4, 5) else runs[1][2].startswith(runs[0][2])
    if runs[0][:2] != runs[1][:2] or not same_out:
        o.problems.append("-j 2 differs from -j 1")
    if any((d / name).read_bytes() != data for name, data in files):
        tally.inputs_modified += 1
        o.problems.append("input modified")
    if o.problems:
        tally.failures.append(o)


def run(seed: int, count: int, work: Path, start: int = 0, stop: int | None = None) -> Tally:
    tally = Tally()
    os.environ.setdefault("CTXTOOL_CACHE_DIR", str(work / "cache"))
    for k, (case, name, data, cmd) in enumerate(cases(seed, count)):
        if k < start or (stop is not None and k >= stop):
            continue
        run_case(case, name, data, cmd, work, tally)
    return tally


if __name__ == "__main__":  # pragma: no cover - by hand
    import argparse
    import tempfile

    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=20261123)
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--many", type=int, default=0, help="many-files cases (each a directory, run with -j 2 and -j 1)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        t = run(args.seed, args.cases, Path(tmp))
        os.environ["CTXTOOL_CACHE_DIR"] = str(Path(tmp) / "cache")
        for case, files, cmd in many_cases(args.seed, args.many):
            run_many_case(case, files, cmd, Path(tmp) / "many", t)
    print(t.summary())
    for f in t.failures:
        print(f.case, f.code, f.problems, (f.stderr.strip().splitlines() or [""])[-1][:200])
