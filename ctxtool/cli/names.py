"""One name per idea across commands: the flags that mean one thing wherever they appear (the
naming table of docs/cli.md, held by tests/test_cli_names.py against every command's
parameters), and the former spellings still accepted, never shown."""

from __future__ import annotations

from typing import Any, NamedTuple


class Name(NamedTuple):
    long: str
    short: str  # "" when the flag has none
    meaning: str


NAMES: tuple[Name, ...] = (
    Name("--output", "-o", "where the result goes (default stdout): the transcript, for a command that rewrites one "
         "(convert, truncate, trim, restore, cut, window, repair, archive, compact); the document (export, "
         "instructions); else what the command prints (its report or table, --json, --jsonl). With stats "
         "--per-message: one row per message (.csv, .parquet)"),
    Name("--format", "-f", "the input's format (default: detected)"),
    Name("--to", "", "the output's format (default: the input's; export: markdown or html)"),
    Name("--json", "", "one JSON object on stdout (schemas/<command>.schema.json)"),
    Name("--jsonl", "", "one JSON line per transcript, then a summary line"),
    Name("--limit", "", "how many items to list in the text report (--json lists all): problems, changes, "
         "largest outputs, lost probes, matches, lines"),
    Name("--model", "-m", "a model of the registry: its context window and encoding"),
    Name("--tokenizer", "-t", "how tokens are counted: heuristic, o200k_base or cl100k_base"),
    Name("--context-window", "", "the context window in tokens (over the model's)"),
    Name("--policy", "-p", "the trigger policy that decides"),
    Name("--keep-recent-tokens", "-k", "tokens kept verbatim after a cut"),
    Name("--reserve-tokens", "", "tokens reserved for the response"),
    Name("--tool-call-cutoff", "-n", "tool results kept visible; older ones are archived"),
    Name("--tool-summary", "", "how archived tool results are summarized: llm, heuristic or off"),
    Name("--strategy", "-s", "the history window's strategy: sliding or bookends (window only)"),
    Name("--jobs", "-j", "worker processes"),
    Name("--on-error", "", "a bad record: fail, or skip and report it"),
    Name("--cache-dir", "", "the ref cache (and summary cache) directory"),
    Name("--events", "", "the audit trail: one JSON line per event, to FILE"),
    Name("--dry-run", "", "report what would be done; write nothing"),
)
BY_LONG = {n.long: n for n in NAMES}

#: former spellings of a command's flags, still accepted (scripts written before the rename),
#: never listed: command path -> {former: current}
RENAMED: dict[str, dict[str, str]] = {
    "stats": {"--top": "--limit"},
    "score": {"--max-lost": "--limit"},
    "refs grep": {"--max-count": "--limit"},
    "archive": {"--cutoff": "--tool-call-cutoff", "--strategy": "--tool-summary"},
}


def accept_former_names(cmd: Any, path: str) -> None:
    """Let ``cmd`` (the command at ``path``, "refs grep") read its former flag spellings as the
    current ones; they stay out of its help."""
    renamed = RENAMED.get(path)
    if not renamed:
        return
    parse = cmd.parse_args

    def parse_args(ctx: Any, args: list[str]) -> Any:
        out: list[str] = []
        for i, a in enumerate(args):
            if a == "--":
                out += args[i:]
                break
            flag, eq, value = a.partition("=")
            out.append(renamed[flag] + eq + value if flag in renamed else a)
        return parse(ctx, out)

    cmd.parse_args = parse_args


def naming_table(commands: dict[str, Any]) -> str:
    """The naming table (Markdown): each flag, its short form, what it means and the commands
    that have it, from ``commands`` (path -> click command)."""
    have: dict[str, list[str]] = {n.long: [] for n in NAMES}
    for path, cmd in commands.items():
        for p in cmd.params:
            for opt in getattr(p, "opts", ()):
                if opt in have and not getattr(p, "hidden", False):
                    have[opt].append(path)
    rows = ["| flag | short | means | commands |", "|---|---|---|---|"]
    for n in NAMES:
        where = ", ".join(f"`{c}`" for c in sorted(have[n.long])) or "-"
        rows.append(f"| `{n.long}` | {f'`{n.short}`' if n.short else ''} | {n.meaning} | {where} |")
    former = "; ".join(f"`{c} {old}`" for c, m in RENAMED.items() for old in m)
    rows += ["", f"Former spellings, still accepted and never listed: {former}."]
    return "\n".join(rows)
