"""What a summary model is given: the summary input (agent-visible messages, tool results clipped,
no trailing calls), the prompts (pi-style structured Markdown, the tool-output cache spec's
``<retain>``/``<summary>`` protocol) and the file lists ctxtool extracts itself from the tool
calls, never left to the model. :func:`serialize` writes messages as ``[User]: ...`` lines."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..model import Block, Message, is_injected
from ..text import lazyre
from . import SummaryRequest

SUMMARY_PREFIX = "[Previous conversation summary]"
TOOL_RESULT_CLIP = 1800  # the Go agent: tool results reduced to 1800 runes for the summary input
TOOL_ARGS_CLIP = 600
MESSAGE_CLIP = 20000  # one user/assistant text in the summary input
SUMMARY_BUDGET = 3000  # tokens a summary should fit (about a product's compaction summary): --summary-budget

STYLES = ("structured", "retain")

# -- prompts ---------------------------------------------------------------------------------
SYSTEM_PROMPT = (
    "You are a context summarization assistant. Your task is to read a conversation between a user "
    "and an AI coding assistant, then produce a structured summary following the exact format specified. "
    "Do NOT continue the conversation. Do NOT respond to any questions in the conversation. "
    "ONLY output the structured summary."
)

#: the handoff's sections, modelled on the products' compaction prompts (Claude Code's: primary
#: request and intent, all user messages, errors and fixes, pending tasks, current work, next
#: step; Codex's handoff: progress and decisions, constraints, what remains, critical data)
STRUCTURED_FORMAT = """## Goal
[The task as the user stated it, in their words (not slash commands or injected content).]

## Current State
- [The current subtask and where it stands; the latest user request and whether it was done]

## User Requests
- [Every user request in order, recent ones verbatim, older ones shortened; corrections marked]

## Constraints & Preferences
- [Requirements and preferences the user stated, quoted where possible]

## Progress
### Done
- [x] [Completed steps: only what the transcript shows succeeded]

### In Progress
- [ ] [Current work]

### Blocked
- [Failures not resolved by a later run, each with its error message]

## Key Decisions
- **[Decision]**: [Rationale; rejected alternatives marked rejected]

## Files Changed
- [path]: [why it changed]

## Next Steps
1. [What should happen next, in order]

## Critical Context
- [Data, values, paths, error messages or state needed to continue]"""

STRUCTURED_PROMPT = (
    "The messages above are a conversation to summarize. Create a structured context checkpoint "
    "summary that another LLM will use to continue the work.\n\nUse this EXACT format:\n\n"
    + STRUCTURED_FORMAT
    + "\n\nKeep each section concise. Preserve exact file paths, function names, commands and error messages. "
    "Do not list read or modified files: ctxtool appends those lists itself."
)

UPDATE_PROMPT = (
    "The messages above are NEW conversation messages to incorporate into the existing summary provided "
    "in <previous-summary> tags.\n\nUpdate the existing structured summary with the new information. RULES:\n"
    "- PRESERVE all existing information from the previous summary\n"
    "- ADD new progress, decisions and context from the new messages\n"
    '- UPDATE the Progress section: move items from "In Progress" to "Done" when completed\n'
    '- UPDATE "Next Steps" based on what was accomplished\n'
    "- PRESERVE exact file paths, function names and error messages\n"
    "- If something is no longer relevant, you may remove it\n\nUse this EXACT format:\n\n"
    + STRUCTURED_FORMAT
    + "\n\nKeep each section concise. Do not list read or modified files: ctxtool appends those lists itself."
)

#: how a model is to use the facts the rules read from the transcript's records
FACTS_PROMPT = (
    "The <facts> block lists what rules read from the transcript's records: the plan tool's items with their "
    "latest status, each test or build run's last result, failures (still open with their error, or resolved "
    "by a later run), commits, the files changed with the reason given, the user's requests. Take them as "
    "true. Call a step done only when it succeeded; never call a failed run ok; an error a later run fixed "
    "is not open; a completed plan item is not a next step; what the user countermanded is not a next step. "
    "Name the current subtask and what remains. A decision is an explicit choice (an approval, a correction, "
    "the design adopted), not a guess."
)

SPLIT_TURN_NOTE = (
    "Note: the last user request in these messages is still in progress; its most recent part is kept "
    "verbatim after the summary. Summarize what was done so far for it under In Progress."
)

# the tool-output cache spec: the interrupt message asking for <retain> and <summary>
RETAIN_SUMMARY_PROMPT = (
    "Summarize the conversation so far so that the work can continue from the summary alone. "
    "Write the summary inside <summary>...</summary> tags. Include the user's goal and constraints, "
    "what has been done, the current state, key decisions, errors encountered and the next steps. "
    "Preserve exact file paths, identifiers, commands and error messages."
)
RETAIN_PROMPT = (
    "Before the summary, list inside <retain>...</retain> tags the information that must be kept "
    "verbatim: tool output reference ids, exact values, paths, and important decisions."
)


def _bullets(items: Iterable[str]) -> str:
    return "\n".join(f"- {x}" for x in items)


# -- summary input (the Go agent and the tool-output cache spec) --------------------------------------------------------
def visible_input(msgs: Sequence[Message]) -> list[Message]:
    """What a summary reads of ``msgs``: the agent-visible messages but the system prompt."""
    return [m for m in msgs if m.agent_visible and m.role != "system"]


def trailing_calls(visible: Sequence[Message]) -> list[Block]:
    """The tool-output cache spec: the tool calls of a trailing assistant message of the summary input
    (:func:`visible_input`): every one of them, unanswered where the history was cut (a cut
    never splits a pair). Not :meth:`ctxtool.history.pairing.Pairing.trailing`, which keeps
    a call the provider ran or one that ended the run: those are dropped from a summary's input too."""
    return visible[-1].tool_calls() if visible and visible[-1].role == "assistant" else []


def strip_trailing_calls(msgs: Sequence[Message]) -> list[Message]:
    """A trailing assistant message with tool calls (:func:`trailing_calls`) keeps only its
    text (a copy), or is dropped when it has none. The originals are never changed."""
    out = list(msgs)
    if trailing_calls(out):
        last = out.pop()
        rest = [b for b in last.content if b.type in ("text", "thinking") and b.text.strip()]
        if any(b.type == "text" for b in rest):
            out.append(Message("assistant", [b for b in rest if b.type == "text"], id=last.id))
    return out


def summary_input(msgs: Sequence[Message]) -> list[Message]:
    """The messages a summary model reads: agent-visible, no system prompt, no trailing calls."""
    return strip_trailing_calls(visible_input(msgs))


def clip(text: str, limit: int) -> str:
    """Head and tail of ``text`` within ``limit`` characters, with an elision marker."""
    if len(text) <= limit:
        return text
    head = max(limit * 2 // 3, 1)
    tail = max(limit - head, 0)
    omitted = len(text) - head - tail
    return f"{text[:head]}\n[... {omitted} characters omitted ...]\n{text[len(text) - tail:] if tail else ''}"


def _call_text(b: Block) -> str:
    return f"{b.name or '?'}({clip(b.arguments_text(), TOOL_ARGS_CLIP)})"


def serialize_message(m: Message, tool_clip: int = TOOL_RESULT_CLIP, text_clip: int = MESSAGE_CLIP) -> str:
    parts: list[str] = []
    if m.metadata.kind == "compaction_summary":
        label = "Earlier summary"
    elif is_injected(m):  # the agent's words in a user-role line, not the user's request
        label = "Injected context"
    else:
        label = {"user": "User", "assistant": "Assistant", "system": "System", "tool": "Tool result"}.get(m.role, m.role)
    texts = [b.text for b in m.content if b.type == "text" and b.text.strip()]
    if texts:
        parts.append(f"[{label}]: {clip(chr(10).join(texts), text_clip)}")
    thinking = [b.text for b in m.content if b.type == "thinking" and b.text.strip()]
    if thinking:
        parts.append(f"[Assistant thinking]: {clip(chr(10).join(thinking), 2000)}")
    calls = m.tool_calls()
    if calls:
        parts.append("[Assistant tool calls]: " + "; ".join(_call_text(b) for b in calls))
    for b in m.tool_results():
        name = f" {b.name}" if b.name else ""
        err = " (error)" if b.is_error else ""
        parts.append(f"[Tool result{name}{err}]: {clip(b.text, tool_clip)}")
    images = sum(1 for b in m.content if b.type == "image")
    if images:
        parts.append(f"[{label}]: [{images} image(s)]")
    return "\n".join(parts)


def serialize(msgs: Sequence[Message], tool_clip: int = TOOL_RESULT_CLIP, text_clip: int = MESSAGE_CLIP) -> str:
    """The conversation as text with clear role labels (tool results clipped)."""
    return "\n\n".join(s for s in (serialize_message(m, tool_clip, text_clip) for m in msgs) if s)


# -- file lists (pi-style compaction) -------------------------------------------------------------------------
READ_TOOLS = {"read", "read_file", "view", "readfile", "open_file", "cat", "notebookread", "read_many_files"}
WRITE_TOOLS = {
    "write", "edit", "multiedit", "notebookedit", "write_file", "edit_file", "create_file", "str_replace",
    "str_replace_editor", "str_replace_based_edit_tool", "apply_diff", "replace", "insert", "create",
}
SEARCH_TOOLS = {"grep", "glob", "ls", "find", "search", "list_dir", "list_directory"}
SHELL_TOOLS = {"bash", "shell", "exec_command", "local_shell", "run_terminal_cmd", "execute_command", "run_command", "terminal"}
PATH_KEYS = ("file_path", "path", "filePath", "notebook_path", "target_file", "filename", "file")
_PATCH_RE = lazyre.compile(r"^\*\*\* (Add|Update|Delete) File: (.+)$", re.M)
_MOVE_RE = lazyre.compile(r"^\*\*\* Move to: (.+)$", re.M)
READ_COMMANDS = {"cat", "head", "tail", "less", "more", "nl", "bat"}
WRITE_COMMANDS = {"touch", "rm", "mv", "cp", "mkdir", "tee"}


def call_args(b: Block) -> dict[str, Any]:
    a = b.arguments
    if isinstance(a, dict):
        return a
    if isinstance(a, str):
        # lazy: start-up (`ctxtool compact` would load ctxtool.io.files)
        from ..io import jsonl as jsonio

        try:
            v = jsonio.loads(a)
        except Exception:  # noqa: BLE001 - free-form arguments (custom tools)
            return {"input": a}
        return v if isinstance(v, dict) else {"input": a}
    return {}


def command_of(b: Block) -> str | None:
    """The shell command of a shell-like tool call."""
    args = call_args(b)
    for k in ("command", "cmd", "commands", "script"):
        v = args.get(k)
        if isinstance(v, list):
            parts = [str(x) for x in v]
            if len(parts) >= 3 and parts[0] in ("bash", "sh", "zsh") and parts[1] in ("-lc", "-c"):
                return " ".join(parts[2:])
            return " ".join(shlex.quote(x) for x in parts)
        if isinstance(v, str) and v.strip():
            return v
    return None


def _path_arg(args: dict[str, Any]) -> str | None:
    for k in PATH_KEYS:
        v = args.get(k)
        if isinstance(v, str) and v.strip() and "\n" not in v and len(v) < 400:
            return v.strip()
    return None


def _files_in_command(cmd: str) -> tuple[list[str], list[str]]:
    read: list[str] = []
    written: list[str] = []
    for seg in re.split(r"&&|\|\||;|\|", cmd):
        try:
            words = shlex.split(seg, posix=True)
        except ValueError:
            continue
        if not words:
            continue
        prog = words[0].rsplit("/", 1)[-1]
        args = [w for w in words[1:] if not w.startswith("-") and not re.fullmatch(r"[\d,+p]+", w)]
        if prog in READ_COMMANDS:
            read.extend(a for a in args if _looks_like_path(a))
        elif prog == "sed":
            files = [a for a in args if _looks_like_file(a) and not _SED_SCRIPT.match(a)]
            (written if "-i" in words or any(w.startswith("-i") for w in words[1:]) else read).extend(files)
        elif prog in ("rg", "grep") and len(args) >= 2:
            read.extend(a for a in args[1:] if _looks_like_file(a))
        elif prog in ("touch", "tee"):
            written.extend(a for a in args if _looks_like_path(a))
    for m in re.finditer(r"(?<![>&\d])>>?\s*([^\s;&|<>]+)", cmd):
        if _looks_like_path(m.group(1)) and not m.group(1).startswith("/dev/"):
            written.append(m.group(1))
    return read, written


_SED_SCRIPT = lazyre.compile(r"^(?:\d+(?:,\d+)?)?s(.).*\1.*\1[gipI0-9]*$|^/.*/[dp]$")


def _looks_like_file(s: str) -> bool:
    """A path naming a file (with an extension), not a directory or a pattern."""
    return _looks_like_path(s) and bool(re.search(r"\.[A-Za-z0-9]{1,8}$", s)) and not re.search(r"[\\^$|()\[\]{}]", s)


def _looks_like_path(s: str) -> bool:
    if not s or len(s) > 300 or s.startswith(("$", "<", "(")) or "*" in s:
        return False
    return "/" in s or bool(re.search(r"\.[A-Za-z0-9]{1,8}$", s))


def extract_files(msgs: Iterable[Message]) -> tuple[list[str], list[str]]:
    """Files read and files modified, from the tool calls (in first-seen order)."""
    read: dict[str, None] = {}
    modified: dict[str, None] = {}
    for m in msgs:
        for b in m.content:
            if b.type != "tool_call":
                continue
            name = (b.name or "").lower()
            short = name.rsplit("__", 1)[-1].rsplit(".", 1)[-1]
            args = call_args(b)
            if short == "apply_patch" or "*** Begin Patch" in str(args.get("input", "")):
                text = args.get("input") or args.get("patch") or b.arguments_text()
                for _op, p in _PATCH_RE.findall(str(text)):
                    modified[p.strip()] = None
                for p in _MOVE_RE.findall(str(text)):
                    modified[p.strip()] = None
                continue
            path = _path_arg(args)
            if short in WRITE_TOOLS or (short.startswith(("write", "edit", "create")) and path):
                if path:
                    modified[path] = None
            elif short in READ_TOOLS or short.startswith("read"):
                if path:
                    read[path] = None
            elif short in SHELL_TOOLS or command_of(b) is not None and short not in SEARCH_TOOLS:
                cmd = command_of(b)
                if cmd:
                    r, w = _files_in_command(cmd)
                    for p in r:
                        read[p] = None
                    for p in w:
                        modified[p] = None
    return [p for p in read if p not in modified], list(modified)


_FILES_RE = lazyre.compile(r"\n*<(read-files|modified-files)>\n?(.*?)\n?</\1>", re.S)


def parse_file_lists(summary: str) -> tuple[list[str], list[str]]:
    read: list[str] = []
    modified: list[str] = []
    for tag, body in _FILES_RE.findall(summary or ""):
        items = [ln.strip() for ln in body.splitlines() if ln.strip()]
        (read if tag == "read-files" else modified).extend(items)
    return read, modified


def strip_file_lists(summary: str) -> str:
    return _FILES_RE.sub("", summary or "").rstrip()


def merge_files(*lists: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for lst in lists:
        for p in lst:
            seen[p] = None
    return list(seen)


def format_file_lists(read: Sequence[str], modified: Sequence[str]) -> str:
    mod = set(modified)
    r = [p for p in read if p not in mod]
    out = []
    if r:
        out.append("<read-files>\n" + "\n".join(r) + "\n</read-files>")
    if modified:
        out.append("<modified-files>\n" + "\n".join(modified) + "\n</modified-files>")
    return "\n\n".join(out)


def with_file_lists(summary: str, read: Sequence[str], modified: Sequence[str]) -> str:
    body = strip_file_lists(summary).rstrip()
    lists = format_file_lists(read, modified)
    return f"{body}\n\n{lists}" if lists else body


def strip_prefix(summary: str) -> str:
    s = summary.lstrip()
    if s.startswith(SUMMARY_PREFIX):
        s = s[len(SUMMARY_PREFIX):].lstrip("\n ")
    return s


# -- the tool-output cache spec <retain>/<summary> ---------------------------------------------------------------------
_TAG_RE = {t: lazyre.compile(rf"<{t}>\s*(.*?)\s*</{t}>", re.S) for t in ("retain", "summary")}


def parse_retain(text: str) -> tuple[str, str]:
    """``(retain, summary)`` from a tool-output cache spec reply; without tags the whole reply is the summary."""
    r = _TAG_RE["retain"].search(text or "")
    s = _TAG_RE["summary"].search(text or "")
    retain = r.group(1).strip() if r else ""
    if s:
        summary = s.group(1).strip()
    else:
        summary = _TAG_RE["retain"].sub("", text or "").strip()
    return retain, summary


def format_retain(retain: str, summary: str) -> str:
    out = []
    if retain.strip():
        out.append(f"<retain>\n{retain.strip()}\n</retain>")
    out.append(f"<summary>\n{summary.strip()}\n</summary>")
    return "\n\n".join(out)


# -- requests -------------------------------------------------------------------------------------
@dataclass(slots=True)
class PromptOptions:
    style: str = "structured"
    summary_directives: Sequence[str] = ()
    retain_directives: Sequence[str] = ()
    instructions: str | None = None
    max_tokens: int = 4096
    tool_clip: int = TOOL_RESULT_CLIP
    split_turn: bool = False
    facts: str | None = None  # what the transcript's records show, for the model to anchor on
    budget: int | None = None  # tokens the summary should fit


def build_prompt(conversation: str, previous_summary: str | None, opts: PromptOptions) -> tuple[str, str]:
    """``(system, prompt)`` for a remote model."""
    parts = [f"<conversation>\n{conversation}\n</conversation>"]
    if previous_summary and previous_summary.strip():
        parts.append(f"<previous-summary>\n{previous_summary.strip()}\n</previous-summary>")
    if opts.style == "retain":
        instr = RETAIN_SUMMARY_PROMPT
        if previous_summary and previous_summary.strip():
            instr += " Merge the previous summary (in <previous-summary> tags) into the new one; lose nothing from it that still matters."
        if opts.summary_directives:
            instr += "\n\nAdditional instructions for the summary:\n" + _bullets(opts.summary_directives)
        retain = RETAIN_PROMPT
        if opts.retain_directives:
            retain += "\n\nAlso retain:\n" + _bullets(opts.retain_directives)
        instr = retain + "\n\n" + instr
    else:
        instr = UPDATE_PROMPT if previous_summary and previous_summary.strip() else STRUCTURED_PROMPT
        if opts.summary_directives:
            instr += "\n\nAdditional instructions:\n" + _bullets(opts.summary_directives)
    if opts.facts:
        parts.insert(1, f"<facts>\n{opts.facts.strip()}\n</facts>")
        instr += "\n\n" + FACTS_PROMPT
    if opts.budget:
        instr += f"\n\nKeep the whole summary under about {opts.budget:,} tokens."
    if opts.split_turn:
        instr += "\n\n" + SPLIT_TURN_NOTE
    if opts.instructions and opts.instructions.strip():
        instr += f"\n\nFocus: {opts.instructions.strip()}"
    parts.append(instr)
    return SYSTEM_PROMPT, "\n\n".join(parts)


def build_request(
    msgs: Sequence[Message],
    previous_summary: str | None,
    opts: PromptOptions,
    *,
    read_files: Sequence[str] = (),
    modified_files: Sequence[str] = (),
    extra: dict[str, Any] | None = None,
) -> SummaryRequest:
    """A summary request for ``msgs`` (already reduced with :func:`summary_input`)."""
    conv = serialize(msgs, opts.tool_clip)
    system, prompt = build_prompt(conv, previous_summary, opts)
    options: dict[str, Any] = {
        "summary_directives": list(opts.summary_directives),
        "retain_directives": list(opts.retain_directives),
        "instructions": opts.instructions,
        "split_turn": opts.split_turn,
    }
    if extra:
        options.update(extra)
    return SummaryRequest(
        system=system,
        prompt=prompt,
        messages=list(msgs),
        previous_summary=previous_summary,
        read_files=list(read_files),
        modified_files=list(modified_files),
        max_tokens=opts.max_tokens,
        style=opts.style,
        options=options,
    )


def prompt_chars(req: SummaryRequest) -> int:
    return len(req.system) + len(req.prompt)
