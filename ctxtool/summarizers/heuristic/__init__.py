"""The offline, deterministic summarizer: seed 003's structured Markdown built from the
transcript itself.

It reads the messages being summarized (agent-visible only, as the seeds prescribe) and
writes what an agent needs to resume: the first request as the goal and later requests,
the user's constraints quoted, what was done (files changed, commands run), failures
still unresolved, decisions stated by the assistant, the last assistant statements as
the current state, and the open tool calls as next steps. With a previous summary
(incremental compaction) its sections are merged with the new ones.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..model import Block, Message, injected_text, is_injected
from ..summary_prompt import WRITE_TOOLS, call_args, clip, command_of, format_retain, strip_file_lists

if TYPE_CHECKING:
    from . import SummaryRequest

VERSION = 1
GOAL_CLIP = 700
REQUEST_CLIP = 300
CONSTRAINT_CLIP = 240
STATEMENT_CLIP = 600
MAX_CONSTRAINTS = 12
MAX_DONE = 25
MAX_DECISIONS = 8
MAX_BLOCKED = 6
MAX_REQUESTS = 8
PREV_FREE_CLIP = 8000

SECTIONS = ("Goal", "Constraints & Preferences", "Progress", "Key Decisions", "Next Steps", "Critical Context")

_CONSTRAINT_RE = re.compile(
    r"\b(must|must not|mustn't|should|shouldn't|never|always|don't|do not|avoid|prefer|please|make sure|"
    r"ensure|only|without|no need|required?|need to|needs to|keep|use)\b",
    re.I,
)
_DECISION_RE = re.compile(
    r"\b(decided|decide to|i'll use|we'll use|i will use|going with|instead of|chose|choose|approach|"
    r"because|the fix is|the cause|root cause|the issue (?:is|was)|the problem (?:is|was)|turns out)\b",
    re.I,
)
_NEXT_RE = re.compile(
    r"\b(next step|next,? (?:i|we)\b|(?:i|we)'ll next|then (?:i|we)'ll|(?:i|we) will now|now (?:i|we)'ll|"
    r"let me (?!know)|todo|remaining|still need|(?:i|we) need to)",
    re.I,
)
_SENT_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(\[])|\n+")
_NOISE_PREFIXES = ("<system-reminder>", "<command-", "<local-command", "Caveat:", "[Request interrupted")
#: context an agent injects as user messages (instructions files, environment): not requests
#: (the agents' own markers are in ctxtool.model.INJECTED_PREFIXES; a bare <context> block too)
_CONTEXT_PREFIXES = ("<context>",)
#: programs whose runs only look at things (exploration, not progress)
_READONLY = {"rg", "grep", "sed", "cat", "ls", "find", "head", "tail", "strings", "wc", "less", "nl", "pwd", "echo",
             "which", "tree", "file", "stat", "du", "awk", "jq", "bat", "fd", "git-status", "git-diff", "git-log",
             "git-show", "git-grep", "git-branch"}


def create(kind: str = "heuristic", **options: Any) -> HeuristicSummarizer:
    return HeuristicSummarizer()


class HeuristicSummarizer:
    name = "heuristic"
    context_window = 10**12  # reads messages, not a prompt: never chunked

    def settings(self) -> dict[str, Any]:
        return {"kind": "heuristic", "version": VERSION}

    def summarize(self, req: SummaryRequest) -> str:
        body = structured_summary(
            req.messages,
            req.previous_summary,
            open_calls=req.options.get("open_calls") or (),
            instructions=req.options.get("instructions"),
            directives=req.options.get("summary_directives") or (),
            split_turn=bool(req.options.get("split_turn")),
        )
        if req.style == "retain":
            retain = retain_section(req.messages, req.options.get("retain_directives") or (), req.previous_summary)
            return format_retain(retain, body)
        return body


# -- helpers -------------------------------------------------------------------------------------
def _user_text(m: Message) -> str:
    txt = "\n".join(b.text for b in m.content if b.type == "text").strip()
    return txt


def _is_noise(text: str) -> bool:
    s = text.lstrip()
    return not s or s.startswith(_NOISE_PREFIXES)


def _one_line(text: str, limit: int) -> str:
    s = re.sub(r"\s+", " ", text).strip()
    return s if len(s) <= limit else s[: limit - 1].rstrip() + "…"


def _sentences(text: str) -> list[str]:
    out = []
    in_code = False
    for raw in text.split("\n"):
        if raw.strip().startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        for s in _SENT_RE.split(raw):
            s = s.strip(" -*#>\t")
            if 12 <= len(s):
                out.append(s)
    return out


def _dedupe(items: list[str], limit: int, keep: str = "first") -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    seq = items if keep == "first" else list(reversed(items))
    for x in seq:
        k = x.lower()
        if k in seen:
            continue
        seen.add(k)
        out.append(x)
    out = out[:limit]
    return out if keep == "first" else list(reversed(out))


def _call_label(b: Block) -> str:
    cmd = command_of(b)
    if cmd:
        return f"`{_one_line(cmd, 160)}`"
    args = call_args(b)
    for k in ("file_path", "path", "filePath", "pattern", "query", "url", "description", "prompt"):
        v = args.get(k)
        if isinstance(v, str) and v.strip():
            return f"{b.name} `{_one_line(v, 140)}`"
    a = b.arguments_text()
    return f"{b.name}({_one_line(a, 100)})" if a else f"{b.name}()"


def _family(b: Block) -> str:
    """What a later success must share with a failure to count as its fix: the same file for
    file tools, the same program and first arguments (e.g. ``uv run pytest``) for commands."""
    cmd = command_of(b)
    if cmd:
        words = [w for w in re.split(r"\s+", cmd.strip()) if w and not w.startswith("-")]
        head = []
        for w in words:
            if w in ("|", "&&", ";", "||", "2>&1"):
                break
            head.append(w)
        return f"{b.name}:" + " ".join(head[:3])
    return _call_label(b)


def _has_path(b: Block) -> bool:
    args = call_args(b)
    return any(isinstance(args.get(k), str) for k in ("file_path", "path", "filePath", "notebook_path", "target_file"))


def _readonly(cmd: str) -> bool:
    """A command made only of programs that look at things (no redirection, no in-place edit)."""
    import shlex

    try:
        lex = shlex.shlex(cmd, posix=True, punctuation_chars=True)
        lex.whitespace_split = True
        tokens = list(lex)
    except ValueError:
        return False
    segs: list[list[str]] = [[]]
    for tk in tokens:
        if tk in ("&&", "||", ";", "|", "&"):
            segs.append([])
        elif tk and set(tk) <= set("<>&|;()"):
            return False  # a redirection (or a subshell): may write
        else:
            segs[-1].append(tk)
    for words in segs:
        if not words:
            continue
        prog = words[0].rsplit("/", 1)[-1]
        if prog == "tee" or (prog == "sed" and any(w.startswith("-i") for w in words[1:])):
            return False
        if prog == "cd":
            continue
        if prog == "git" and len(words) > 1:
            prog = f"git-{words[1]}"
        if prog not in _READONLY:
            return False
    return True


def _first_line(text: str, limit: int = 200) -> str:
    for ln in text.splitlines():
        if ln.strip():
            return _one_line(ln, limit)
    return ""


def _error_line(text: str) -> str:
    """The most telling line of a failed tool output."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if re.search(r"error|exception|failed|fatal|traceback|denied|not found|no such", ln, re.I):
            return _one_line(ln, 220)
    return _one_line(lines[-1], 220) if lines else "(no output)"


_SECTION_RE = re.compile(r"^##\s+(.+?)\s*$", re.M)


def parse_sections(summary: str) -> dict[str, str]:
    """The ``## Section`` bodies of a structured summary (empty for free-form text)."""
    text = strip_file_lists(summary or "")
    out: dict[str, str] = {}
    matches = list(_SECTION_RE.finditer(text))
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        out[m.group(1).strip()] = text[m.end():end].strip()
    return out


def _items(body: str) -> list[str]:
    out = []
    for ln in body.splitlines():
        s = ln.strip()
        if not s or s.startswith("#"):
            continue
        s = re.sub(r"^(?:[-*]\s+(?:\[[ x]\]\s+)?|\d+\.\s+)", "", s)
        if s and not s.startswith("(none"):
            out.append(s)
    return out


# -- the summary -------------------------------------------------------------------------------------
def structured_summary(
    msgs: Sequence[Message],
    previous_summary: str | None = None,
    *,
    open_calls: Sequence[str] = (),
    instructions: str | None = None,
    directives: Sequence[str] = (),
    split_turn: bool = False,
) -> str:
    prev = parse_sections(previous_summary or "")
    prev_free = ""
    if previous_summary and not prev:  # a free-form earlier summary: kept (clipped), not parsed
        prev_free = clip(strip_file_lists(previous_summary).strip(), PREV_FREE_CLIP)
    elif "### Earlier summary" in prev.get("Critical Context", ""):  # carried from an earlier round
        ctx_body, _, quoted = prev["Critical Context"].partition("### Earlier summary")
        prev["Critical Context"] = ctx_body
        prev_free = "\n".join(ln[2:] if ln.startswith("> ") else ln.lstrip(">") for ln in quoted.strip().splitlines())

    # user requests and constraints
    requests: list[str] = []
    constraints: list[str] = []
    for m in msgs:
        if m.role != "user" or m.metadata.kind in ("compaction_summary", "tool_summary"):
            continue
        txt = _user_text(m)
        if _is_noise(txt):
            continue
        # what the agent injected (skill documents, instructions files, reminders) is not a request;
        # its ALWAYS/NEVER rules are still constraints
        injected = is_injected(m) or injected_text(txt) is not None or txt.lstrip().startswith(_CONTEXT_PREFIXES)
        if not injected:
            requests.append(txt)
        found = 0
        for s in _sentences(txt):
            if _CONSTRAINT_RE.search(s) and len(s) <= 400 and (not injected or re.search(r"\b(ALWAYS|NEVER|MUST)\b", s)):
                constraints.append(f'"{_one_line(s, CONSTRAINT_CLIP)}"')
                found += 1
                if injected and found >= 3:
                    break

    # tool calls, results, failures
    results: dict[str, Block] = {}
    for m in msgs:
        for b in m.tool_results():
            if b.id:
                results[b.id] = b
    done: list[str] = []
    failures: list[tuple[str, str, str]] = []  # (label key, label, error line)
    succeeded: set[str] = set()
    tool_counts: dict[str, int] = {}
    explored = 0
    for m in msgs:
        for b in m.tool_calls():
            tool_counts[b.name or "?"] = tool_counts.get(b.name or "?", 0) + 1
            label = _call_label(b)
            res = results.get(b.id or "")
            if res is None:
                continue  # no result yet: a pending call (next steps), not progress
            if res.is_error:
                failures.append((_family(b), label, _error_line(res.text)))
                continue
            succeeded.add(_family(b))
            for i, (fam, _, _) in enumerate(failures):
                if fam == _family(b):  # a later success of the same kind resolves it
                    failures[i] = (fam + "#resolved", *failures[i][1:])
            short = (b.name or "").lower().rsplit("__", 1)[-1]
            cmd = command_of(b)
            if short == "apply_patch" or short in WRITE_TOOLS or (
                short.startswith(("write", "edit", "create")) and _has_path(b)
            ):
                done.append(f"{b.name}: {label.split(' ', 1)[-1]}" if " " in label else f"{b.name}")
            elif cmd is not None and short not in ("write_stdin",):
                if _readonly(cmd):
                    explored += 1
                else:
                    done.append(f"Ran {label}")
    blocked = [f"{lab} failed: {err}" for key, lab, err in failures if not key.endswith("#resolved")]
    resolved = [f"{lab} failed earlier ({err}) and later succeeded" for key, lab, err in failures if key.endswith("#resolved")]

    # assistant statements
    statements: list[str] = []
    decisions: list[str] = []
    next_hints: list[str] = []
    for m in msgs:
        if m.role != "assistant":
            continue
        txt = "\n".join(b.text for b in m.content if b.type == "text").strip()
        if not txt:
            continue
        statements.append(txt)
        for s in _sentences(txt):
            if _DECISION_RE.search(s) and len(s) <= 500:
                decisions.append(_one_line(s, 300))
    for s in _sentences(statements[-1] if statements else ""):  # only the latest intentions
        if _NEXT_RE.search(s) and len(s) <= 400:
            next_hints.append(_one_line(s, 240))

    lines: list[str] = []
    # Goal
    lines.append("## Goal")
    goal_items = _items(prev.get("Goal", ""))
    if goal_items:
        lines.extend(f"- {g}" for g in goal_items)
    elif prev_free:
        lines.append("- Continue the work described in the earlier summary (under Critical Context)")
    if requests:
        first = clip(requests[0].strip(), GOAL_CLIP)
        if not goal_items and not prev_free:
            lines.append(first if "\n" not in first else "\n".join(f"> {ln}" for ln in first.splitlines() if ln.strip()))
        else:
            lines.append(f"- Then: {_one_line(requests[0], REQUEST_CLIP)}")
        later = [_one_line(r, REQUEST_CLIP) for r in requests[1:]]
        later = _dedupe(later, MAX_REQUESTS, keep="last")
        if later:
            lines.append("")
            lines.append("Later requests, in order:")
            lines.extend(f"- {r}" for r in later)
    elif not goal_items and not prev_free:
        lines.append("- (no user request in the summarized part)")
    if instructions and instructions.strip():
        lines.append(f"- Summary focus requested: {_one_line(instructions, 300)}")

    # Constraints
    lines += ["", "## Constraints & Preferences"]
    cons = _dedupe(_items(prev.get("Constraints & Preferences", "")) + constraints, MAX_CONSTRAINTS + 8)
    cons = cons[:MAX_CONSTRAINTS] if len(cons) > MAX_CONSTRAINTS else cons
    lines.extend(f"- {c}" for c in cons) if cons else lines.append("- (none stated)")

    # Progress
    prev_progress = parse_subsections(prev.get("Progress", ""))
    lines += ["", "## Progress", "### Done"]
    if explored:
        done.append(f"Explored with {explored} read-only commands (search, listing, viewing); files read are listed below")
    done_items = _dedupe(_items(prev_progress.get("Done", "")) + done, 10**6)
    if len(done_items) > MAX_DONE:
        skipped = len(done_items) - MAX_DONE
        done_items = [f"(and {skipped} earlier steps)"] + done_items[-MAX_DONE:]
    lines.extend(f"- [x] {d}" for d in done_items) if done_items else lines.append("- [x] (nothing completed yet)")
    lines += ["", "### In Progress"]
    earlier = [x for x in _items(prev_progress.get("In Progress", "")) if not x.startswith(("(", "[ ] ("))]
    if requests:
        for x in earlier[-3:]:
            lines.append(f"- [ ] {x if x.startswith('(earlier)') else '(earlier) ' + x}")
        if len(requests) > 1 or earlier:
            current = _one_line(requests[-1], REQUEST_CLIP)
        else:  # the only request is the goal: say where the work stands instead of repeating it
            state = _sentences(statements[-1])[0] if statements and _sentences(statements[-1]) else ""
            current = "The goal above" + (f"; latest state: {_one_line(state, 240)}" if state else "")
        lines.append(f"- [ ] {current}" + (" (continued in the kept messages)" if split_turn else ""))
    else:
        for x in earlier:
            lines.append(f"- [ ] {x}")
        if not earlier:
            lines.append("- [ ] (see the kept messages)")
    lines += ["", "### Blocked"]
    blk = _dedupe(blocked, MAX_BLOCKED, keep="last")
    lines.extend(f"- {b}" for b in blk) if blk else lines.append("- (none)")

    # Key decisions
    lines += ["", "## Key Decisions"]
    dec = _dedupe(_items(prev.get("Key Decisions", "")) + decisions, 10**6)
    dec = dec[-MAX_DECISIONS:]
    lines.extend(f"- {d}" if d.startswith("**") else f"- **Noted**: {d}" for d in dec) if dec else lines.append("- (none recorded)")

    # Next steps
    lines += ["", "## Next Steps"]
    steps: list[str] = []
    for c in open_calls:
        steps.append(f"Complete the pending tool call {c} (it had not returned when the history was compacted)")
    steps.extend(_dedupe(next_hints, 4, keep="last"))
    if blk:
        steps.append(f"Resolve: {blk[-1]}")
    if requests and (len(requests) > 1 or not steps):
        steps.append(f"Continue with the latest request: {_one_line(requests[-1], 200)}")
    if not steps:
        steps = _items(prev.get("Next Steps", "")) or ["Continue from the kept messages that follow this summary"]
    for d in directives:
        steps.append(f"Keep in mind: {d}")
    lines.extend(f"{i}. {s}" for i, s in enumerate(steps, 1))

    # Critical context
    lines += ["", "## Critical Context"]
    ctx = _items(prev.get("Critical Context", ""))[-6:]
    if statements:
        last = statements[-1]
        ctx.append("Last assistant statement: " + _one_line(last, STATEMENT_CLIP))
        if len(statements) > 1:
            ctx.append("Before that: " + _one_line(statements[-2], STATEMENT_CLIP // 2))
    ctx.extend(resolved[-3:])
    if tool_counts:
        top = sorted(tool_counts.items(), key=lambda kv: (-kv[1], kv[0]))[:8]
        ctx.append("Tool calls in the summarized part: " + ", ".join(f"{n} ×{c}" for n, c in top))
    ctx.append(f"Summarized {len(msgs)} messages ({len(requests)} user requests)")
    lines.extend(f"- {c}" for c in _dedupe(ctx, 20))
    if prev_free:
        lines += ["", "### Earlier summary", *(f"> {ln}" if ln.strip() else ">" for ln in prev_free.splitlines())]
    return "\n".join(lines).rstrip() + "\n"


def parse_subsections(body: str) -> dict[str, str]:
    out: dict[str, str] = {}
    matches = list(re.finditer(r"^###\s+(.+?)\s*$", body, re.M))
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(body)
        out[m.group(1).strip()] = body[m.end():end].strip()
    return out


def retain_section(msgs: Sequence[Message], directives: Sequence[str], previous_summary: str | None) -> str:
    """Seed 001 <retain>: tool output refs, failed commands, and what the directives ask for."""
    out: list[str] = []
    if previous_summary:
        from ..summary_prompt import parse_retain

        r, _ = parse_retain(previous_summary)
        out.extend(_items(r))
    for m in msgs:
        ref = m.metadata.output_ref
        if isinstance(ref, dict) and ref.get("id"):
            out.append(f"tool output ref {ref['id']}")
    for d in directives:
        out.append(f"(directive) {d}")
    return "\n".join(f"- {x}" for x in _dedupe(out, 40)) if out else "- (nothing beyond the summary)"
