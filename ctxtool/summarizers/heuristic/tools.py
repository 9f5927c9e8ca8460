"""What the tool calls did: steps done with their result, failures with the error message that
explains them (not the output's last line) and whether a later success of the same command or
file resolved them, and read-only exploration counted apart."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from ...model import Block, Message
from ...text import lazyre
from ...text.prose import one_line
from ..prompt import READ_TOOLS, SEARCH_TOOLS, WRITE_TOOLS, call_args, command_of, extract_files

MAX_DONE = 25
ERROR_CLIP = 240
RESULT_CLIP = 90
MAX_LINE = 400  # longer lines are data (minified code, JSON), not messages

#: programs whose runs only look at things (exploration, not progress)
_READONLY = {"rg", "grep", "sed", "cat", "ls", "find", "head", "tail", "strings", "wc", "less", "nl", "pwd", "echo",
             "which", "tree", "file", "stat", "du", "awk", "jq", "bat", "fd", "git-status", "git-diff", "git-log",
             "git-show", "git-grep", "git-branch"}
_NOT_THE_STEP = {"cd", "echo", "printf", "true", "source", ".", "export", "set", "sleep"}
#: lines that state an error (3), that name a failure precisely (2); _GENERIC: that mention one (1)
_ERROR = lazyre.compile(
    r"\b\w*(?:Error|Exception)\b\s*[:(]|\berror(?:\[\w+\]|\s+TS\d+)?:|^\s*error\b|\bTraceback\b|\bpanic:|\bfatal:|"
    r"can never match|no local return|not found in file|pattern_match|(?-i:\bFAILED\b)|AssertionError|module_not_found|"
    r"command not found|permission denied",
    re.I,
)
_SPECIFIC = lazyre.compile(
    r"does not exist|no such file|cannot find|could not find|could not|couldn't|cannot|can't|not formatted|"
    r"too complex|no changes made|is not defined|undefined (?:function|variable|method)",
    re.I,
)
_GENERIC = lazyre.compile(r"\b(errors?|failed|failure|denied|refused|invalid|unexpected|expected|mismatch|timed out|"
                          r"aborted|warning|rejected|not allowed)\b", re.I)
_TRIVIAL = lazyre.compile(r"^(?:exit code \d+|(?:command|process) exited with code \d+|exit status \d+|\(no output\)|"
                          r"\[output truncated.*|fix these issues.*|:?error|end|total errors:.*|\d+ errors?.*|done in .*|"
                          r"output:|wall time:.*|chunk id:.*|original token count:.*|\W*metadata\W+exit_code.*)$",
                          re.I)
_LOCATION = lazyre.compile(r"^\S+:\d+(?::\d+)?(?::\w+)?$")
_EXIT = lazyre.compile(r"(?:exit(?:ed)? (?:with )?code|exit status|process exited with code)[: ]+([1-9]\d*)", re.I)
_EXIT0 = lazyre.compile(r"(?:exit(?:ed)? (?:with )?code|exit status|process exited with code)[: ]+0\b", re.I)
#: output that states a failure, whatever the exit status (a pipe into head or tail hides it)
_FAIL_TEXT = lazyre.compile(
    r"\berror TS\d{4}\b|^\s*(?:error|fatal)(?:\[\w+\])?:|\bnpm ERR!|^Traceback \(most recent call last\)|"
    r"(?-i:^FAILED\b|\bFAILED (?=\S*(?:test|::))|\b\d+ failed\b)|(?-i:^FAIL\s)|\bcommand not found\b|"
    r"\bBuild failed\b|\bCompilation failed\b|\*\* \(\w*Error\)",
    re.I | re.M,
)
_TAGS = lazyre.compile(r"</?tool_use_error>")
#: test, build, type-check and lint runs
_CHECK = lazyre.compile(
    r"\b(?:pytest|tox|nox|jest|vitest|mocha|phpunit|rspec|ctest|tsc|mypy|pyright|ruff|eslint|clippy|"
    r"(?:npm|pnpm|yarn|bun)\s+(?:run\s+)?(?:test|build|check|lint|typecheck|tsc)\w*|"
    r"(?:cargo|go|mix|dotnet|gradle|mvn|swift|zig)\s+(?:test|build|check|compile)|make(?:\s+\w*(?:test|check|build|lint)\w*)?)\b")


@dataclass(slots=True)
class Failure:
    family: str
    label: str
    error: str
    resolved_by: str | None = None
    count: int = 1

    def times(self) -> str:
        return f" (×{self.count})" if self.count > 1 else ""


@dataclass(slots=True)
class Commit:
    message: str
    hash: str | None
    files: list[str]

    def line(self, rel: Callable[[str], str] = str) -> str:
        fs = [rel(f) for f in self.files]
        shown = ", ".join(f"`{f}`" for f in fs[:6]) + (f" and {len(fs) - 6} more" if len(fs) > 6 else "")
        return (f"Committed{' ' + self.hash[:10] if self.hash else ''}: \"{self.message}\""
                + (f" ({shown})" if shown else ""))


@dataclass(slots=True)
class Activity:
    done: list[str] = field(default_factory=list)
    commits: list[Commit] = field(default_factory=list)
    checks: dict[str, tuple[str, str]] = field(default_factory=dict)  # family -> (label, last result), last seen last
    failures: list[Failure] = field(default_factory=list)
    explored: int = 0
    missed: list[str] = field(default_factory=list)  # reads and searches that failed (what is not there)
    looked: list[str] = field(default_factory=list)  # read-only commands that ran (what was looked at)
    tool_counts: dict[str, int] = field(default_factory=dict)

    def blocked(self) -> list[Failure]:
        return _grouped(f for f in self.failures if f.resolved_by is None)

    def resolved(self) -> list[Failure]:
        return _grouped(f for f in self.failures if f.resolved_by is not None)


def _grouped(failures: Iterable[Failure]) -> list[Failure]:
    """One entry per family (the latest failure of it, counted), in the order last seen."""
    out: dict[str, Failure] = {}
    for f in failures:
        n = out.pop(f.family).count + 1 if f.family in out else 1
        out[f.family] = Failure(f.family, f.label, f.error, f.resolved_by, n)
    return list(out.values())


def short_name(b: Block) -> str:
    return (b.name or "").lower().rsplit("__", 1)[-1]


def call_label(b: Block) -> str:
    cmd = command_of(b)
    if cmd:
        return f"`{one_line(cmd, 160)}`"
    args = call_args(b)
    for k in ("file_path", "path", "filePath", "notebook_path", "pattern", "query", "url", "description", "prompt"):
        v = args.get(k)
        if isinstance(v, str) and v.strip():
            return f"{b.name} `{one_line(v, 140)}`"
    a = b.arguments_text()
    return f"{b.name}({one_line(a, 100)})" if a else f"{b.name}()"


def family(b: Block) -> str:
    """What a later success must share with a failure to count as its fix: the same file for
    file tools, the same program and first arguments (e.g. ``uv run pytest``) for commands.
    ``score`` has its own rule for this (:attr:`ctxtool.score.records.Run.family`), apart on purpose: a measure shares no code with what it measures."""
    cmd = command_of(b)
    if cmd:
        # the last step of a chain, before any pipe: `cd DIR && make test | tail` is a `make test`,
        # `git add -A && git commit -m ...` a `git commit`
        steps = [seg.split("|", 1)[0].split() for seg in re.split(r"&&|\|\||;", cmd)]
        steps = [s for s in steps if s and re.fullmatch(r"[\w./-]+", s[0]) and s[0] not in _NOT_THE_STEP]
        words = [w for w in (steps[-1] if steps else []) if not w.startswith(("-", "'", '"')) and w != "2>&1"]
        return "cmd:" + " ".join(words[: 2 if words[:1] == ["git"] else 3]) if words else call_label(b)
    args = call_args(b)
    for k in ("file_path", "path", "filePath", "notebook_path"):
        if isinstance(args.get(k), str):
            return f"{'edit' if _writes(b) else short_name(b)}:{args[k]}"
    return call_label(b)


def _write_step(b: Block, label: str) -> str:
    """``Edit: `path` `` (a patch: the files it touches)."""
    if short_name(b) == "apply_patch" or not _has_path(b):
        files = extract_files([Message("assistant", [b])])[1]
        if files:
            shown = ", ".join(f"`{f}`" for f in files[:4]) + (f" and {len(files) - 4} more" if len(files) > 4 else "")
            return f"{b.name}: {shown}"
    return f"{b.name}: {label.split(' ', 1)[-1]}" if " " in label else f"{b.name}"


def _looks(b: Block) -> bool:
    """A tool that only reads or searches."""
    short = short_name(b).rsplit(".", 1)[-1]
    return short in READ_TOOLS or short in SEARCH_TOOLS or short.startswith(("read", "search", "list", "glob", "grep"))


def _writes(b: Block) -> bool:
    short = short_name(b)
    return short == "apply_patch" or short in WRITE_TOOLS or (short.startswith(("write", "edit", "create")) and _has_path(b))


def _has_path(b: Block) -> bool:
    args = call_args(b)
    return any(isinstance(args.get(k), str) for k in ("file_path", "path", "filePath", "notebook_path", "target_file"))


def _segments(cmd: str) -> list[list[str]] | None:
    """The programs of a command line with their words; None when it redirects (may write)."""
    try:
        lex = shlex.shlex(cmd, posix=True, punctuation_chars=True)
        lex.whitespace_split = True
        tokens = list(lex)
    except ValueError:
        return None
    segs: list[list[str]] = [[]]
    for tk in tokens:
        if tk in ("&&", "||", ";", "|", "&"):
            segs.append([])
        elif tk and set(tk) <= set("<>&|;()"):
            return None
        else:
            segs[-1].append(tk)
    return [s for s in segs if s]


def _program(words: list[str]) -> str:
    prog = words[0].rsplit("/", 1)[-1]
    return f"git-{words[1]}" if prog == "git" and len(words) > 1 else prog


def readonly(cmd: str) -> bool:
    """A command made only of programs that look at things (no redirection but of errors to
    /dev/null or into the output, no in-place edit)."""
    segs = _segments(re.sub(r"\s2>(?:/dev/null|&1)", " ", cmd))
    if segs is None:
        return False
    for words in segs:
        prog = _program(words)
        if prog == "tee" or (prog == "sed" and any(w.startswith("-i") for w in words[1:])):
            return False
        if prog != "cd" and prog not in _READONLY:
            return False
    return True


def _lines(text: str) -> list[str]:
    text = _TAGS.sub("\n", text.replace("\\n", "\n"))
    out = []
    for ln in text.splitlines():
        s = ln.strip().strip("┃│>").strip()
        if sum(c.isalnum() for c in s) >= 4 and len(s) <= MAX_LINE and not _TRIVIAL.match(s):
            out.append(s)
    return out


def error_line(text: str) -> str:
    """The line of a failed tool output that says what went wrong: an exception or typed error
    line first, then a line naming a failure; prefixed by its location line (``file:12:3``) and
    by a header that introduces it (``Pre-commit validation failed:``)."""
    lines = _lines(text)
    if not lines:
        m = _EXIT.search(text)
        return f"exit code {m.group(1)}, no output" if m else "(no output)"
    best, score = 0, -1
    for i, ln in enumerate(lines):
        s = 3 if _ERROR.search(ln) else 2 if _SPECIFIC.search(ln) else 1 if _GENERIC.search(ln) else 0
        if s > score:
            best, score = i, s
            if s == 3:
                break
    if score <= 0:
        best = len(lines) - 1
    out = lines[best]
    if _LOCATION.match(out) and best + 1 < len(lines):  # a location line: what it says is on the next
        out = f"{out} {lines[best + 1]}"
    elif best > 0 and _LOCATION.match(lines[best - 1]):
        out = f"{lines[best - 1]} {out}"
    head = lines[0]
    if best > 0 and head.endswith(":") and _GENERIC.search(head) and head not in out:
        out = f"{head} {out}"
    return one_line(out, ERROR_CLIP)


def failed(b: Block, res: Block) -> bool:
    """Whether a call failed: its result is flagged an error, a command reports a non-zero exit
    status, or a command's output states errors (``error TS2304``, ``error:``, ``FAILED``, a
    traceback), whatever exit status a pipe gave it."""
    if res.is_error:
        return True
    if command_of(b) is None:
        return False
    text = res.text
    if _EXIT.search(text[:4000]) or _EXIT.search(text[-2000:]):
        return True
    return bool(_FAIL_TEXT.search(text[:20000]) or _FAIL_TEXT.search(text[-4000:]))


def _result_note(res: Block) -> str:
    """What a successful run's result says: still running, or ok (with its exit status when
    the result shows it) and its last line."""
    lines = _lines(res.text)
    if lines and (m := re.match(r"Process running with session ID (\d+)", lines[-1])):
        return f"still running when it returned (session {m.group(1)})"
    status = "ok (exit 0)" if _EXIT0.search(res.text) else "ok"
    return f"{status}: {one_line(lines[-1], RESULT_CLIP)}" if lines else status


def _family_step(fam: str) -> str:
    """Staging is part of committing: a failed ``git add`` is resolved by a later commit."""
    return "cmd:git commit" if fam.startswith("cmd:git add") else fam


def is_check(cmd: str) -> bool:
    """A test, build, type-check or lint run (its result is reported as such)."""
    return bool(_CHECK.search(cmd))


def _commit(cmd: str, res: Block, edited: list[str]) -> Commit | None:
    """The commit a successful ``git commit`` made: its message, short hash and files."""
    if not re.search(r"\bgit\s+commit\b", cmd):
        return None
    msg = ""
    m = re.search(r"<<-?\s*'?(\w+)'?\n(.*?)\n\s*\1\b", cmd, re.S) or re.search(
        r"\s-[a-zA-Z]*m\s+(?:\"((?:[^\"\\]|\\.)*)\"|'([^']*)')", cmd, re.S)
    if m:
        msg = next((g for g in m.groups()[1 if m.re.pattern.startswith("<<") else 0:] if g), "").strip()
        msg = next((ln.strip() for ln in msg.splitlines() if ln.strip()), "")
    h = re.search(r"^\[[^\]\s]+(?: \([^)]*\))? ([0-9a-f]{7,40})\] (.*)$", res.text, re.M)
    if not msg and h:
        msg = h.group(2)
    files: list[str] = []
    for seg in re.split(r"&&|;", cmd):
        words = seg.split()
        if words[:2] == ["git", "add"]:
            files += [w for w in words[2:] if not w.startswith("-") and w != "."]
    return Commit(one_line(msg, 200) or "(no message shown)", h.group(1) if h else None,
                  list(dict.fromkeys(files or edited)))


def activity(msgs: Sequence[Message]) -> Activity:
    results: dict[str, Block] = {}
    for m in msgs:
        for b in m.tool_results():
            if b.id:
                results[b.id] = b
    act = Activity()
    steps: dict[str, tuple[str, int]] = {}  # label -> (line, count), in the order last seen
    edited: list[str] = []  # files edited since the last commit
    for m in msgs:
        for b in m.tool_calls():
            act.tool_counts[b.name or "?"] = act.tool_counts.get(b.name or "?", 0) + 1
            res = results.get(b.id or "")
            if res is None:
                continue  # no result yet: a pending call (next steps), not progress
            label, fam, cmd = call_label(b), _family_step(family(b)), command_of(b)
            if failed(b, res):
                if (cmd is not None and readonly(cmd)) or (cmd is None and _looks(b)):
                    act.explored += 1  # a search that found nothing, a file that is not there: not a blocker
                    act.missed.append(f"{label}: {error_line(res.text)}")
                    continue
                err = error_line(res.text)
                act.failures.append(Failure(fam, label, err))
                steps.pop(label, None)  # nothing failed is done: its last run failed
                if cmd is not None and is_check(cmd):
                    act.checks.pop(fam, None)
                    act.checks[fam] = (label, f"FAILED: {err}")
                continue
            for f in act.failures:
                if f.family == fam and f.resolved_by is None:  # a later success of the same step resolves it
                    f.resolved_by = label
            short = short_name(b)
            if _writes(b):
                key = _write_step(b, label)
                n = steps.pop(key, ("", 0))[1] + 1
                steps[key] = (key, n)
                edited += extract_files([Message("assistant", [b])])[1]
            elif cmd is not None and short not in ("write_stdin",):
                if readonly(cmd):
                    act.explored += 1
                    act.looked.append(label)
                elif (c := _commit(cmd, res, edited)) is not None:
                    act.commits.append(c)
                    edited = []
                elif is_check(cmd):
                    act.checks.pop(fam, None)
                    act.checks[fam] = (label, _result_note(res))
                else:
                    n = steps.pop(label, ("", 0))[1] + 1
                    steps[label] = (f"Ran {label}: {_result_note(res)}", n)
    act.done = [line + (f" (×{n})" if n > 1 else "") for line, n in steps.values()]
    return act
