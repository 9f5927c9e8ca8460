"""The summary's layout: its sections as blocks of entries, in the order they are shown, filled
in order of value until the budget is spent (what does not fit is left out with a mark; older
user requests are shortened before recent ones)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...text.prose import one_line
from ...tokens.heuristic import CHARS_PER_TOKEN  # the budget is counted like the default tokenizer
from ..prompt import SUMMARY_BUDGET, clip
from . import ledger, plan
from .previous import fit
from .text import dedupe, items, split_headings, verbatim_item

if TYPE_CHECKING:
    from . import Facts

PREV_SHARE = 0.35  # what a carried previous summary may take of the budget
REQUESTS_SHARE = 0.4  # ... and the user's requests
PREFIX_RESERVE = 200  # characters kept free of the budget
MAX_BLOCKED = 6
MAX_RESOLVED = 10
MAX_REASONS = 2
STATEMENT_CLIP = 600
REQUESTS_TITLE = "User requests, in order (verbatim)"  # (where version 2 listed them, under Goal)


@dataclass(slots=True)
class Block:
    """A part of the summary: its heading and entries (each a list of lines), filled in order
    of ``rank`` (lower first) while the budget lasts."""

    order: int
    heading: list[str]
    entries: list[list[str]]
    rank: int
    label: str = "items"
    keep_tail: bool = False  # the latest entries matter most (requests, steps done)
    shown: list[list[str]] = field(default_factory=list)
    left_out: int = 0


def blocks(f: Facts) -> list[Block]:
    out: list[Block] = []

    def add(order: int, heading: str | list[str], entries: list[list[str]], rank: int, **kw: Any) -> None:
        if entries:
            out.append(Block(order, [heading] if isinstance(heading, str) else heading, entries, rank, **kw))

    # Goal
    goal = f.goal_text()
    g: list[list[str]] = []
    if goal:
        g.append(verbatim_item(goal))
    elif f.prev.at is not None:
        g.append(["- Continue the work of the earlier summary (carried below)"])
    else:
        g.append(["- (no user request in the summarized part)"])
    if f.instructions and f.instructions.strip():
        g.append([f"- Summary focus requested: {one_line(f.instructions, 300)}"])
    add(10, "## Goal", g, 0)
    # Current State
    st: list[list[str]] = []
    if f.plan is not None:
        _, its = f.plan
        active = [it for it in its if it.active]
        pending = [it for it in its if not it.done and not it.active]
        for it in active:
            st.append([f"- Current subtask (in progress in the plan): {one_line(it.text, 200)}"])
        if not active and pending:
            st.append([f"- No plan item in progress; next pending: {one_line(pending[0].text, 200)}"])
        st.append([f"- Plan: {sum(it.done for it in its)} of {len(its)} items completed, "
                   f"{len(active)} in progress, {len(pending)} pending (listed under Progress)"])
    else:
        steps = plan.text_plan(f.msgs)
        if steps:
            st.append(["- Last plan the assistant wrote (in its text; no plan tool recorded one):",
                       *[f"  {n}. {x}" for n, x in enumerate(steps, 1)]])
    status = f.latest_status()
    if status:
        st.append([f"- {status}" + (" (its turn continues in the kept messages)" if f.split_turn else "")])
    if f.sd.statements:
        st.append(["- Where the assistant stopped: "
                   + one_line(clip(f.sd.statements[-1], STATEMENT_CLIP), STATEMENT_CLIP + 80)])
    add(20, "## Current State", st, 1)
    # User Requests
    reqs = f.later_requests()
    earlier = items(split_headings(f.prev.own.get("Goal", ""), 3)[1].get(REQUESTS_TITLE, ""))
    earlier += items(f.prev.own.get("User Requests", ""))
    rq = [verbatim_item(x) for x in earlier] + [
        verbatim_item(("(correction) " if r.correction else "") + r.text) for r in reqs]
    add(30, "## User Requests", rq, 5, label="earlier requests",
        keep_tail=True)
    # Constraints
    cons = dedupe(items(f.prev.own.get("Constraints & Preferences", "")) + f.constraints, 10**6)
    add(40, "## Constraints & Preferences", [[f"- {c}"] for c in cons], 6, label="constraints", keep_tail=True)
    # Progress
    prog_lead, prog_subs = split_headings(f.prev.own.get("Progress", ""), 3)
    add(50, "## Progress", [[]], 0)
    if f.plan is not None:
        add(51, f"### {plan.TITLE}", [[it.line()] for it in f.plan[1]], 4, label="plan items")
    elif prog_subs.get(plan.TITLE):
        carried = [ln for ln in prog_subs[plan.TITLE].splitlines() if ln.strip()]
        add(51, f"### {plan.TITLE} (from the earlier summary)", [[f._reconcile_line(ln)] for ln in carried], 4,
            label="plan items")
    blocked = f.act.blocked()
    checks = dict(f.act.checks)
    bl = [[f._rel_step(f"- {x.label} failed{x.times()}: {x.error}")] for x in blocked if x.family not in checks]
    add(52, "### Blocked (failed, not resolved by a later run)", bl[-MAX_BLOCKED:], 3, label="failures")
    add(53, "### Test and build runs (last result of each)",
        [[f"- {label}: {result}"] for label, result in checks.values()], 7, label="runs", keep_tail=True)
    add(54, "### Commits", [[f"- [x] {c.line(f.rel)}"] for c in f.act.commits], 8, label="commits",
        keep_tail=True)
    done = [f._rel_step(d) for d in f.act.done]
    if f.act.explored:
        done.append(f"Explored with {f.act.explored} read-only commands (search, listing, viewing)")
    prev_done = [x for x in items(prog_subs.get("Done", "")) if not x.startswith("(and ")]
    prev_open = [x for x in items(prog_subs.get("In Progress", "")) if not x.startswith(("(", "[ ] ("))]
    for x in prev_open:  # an earlier open item later work did
        if (ev := f.done_since(x)) is not None:
            prev_done.append(f"{one_line(x, 200)} (done since the earlier summary: {ev})")
    add(55, "### Done", [[f"- [x] {d}"] for d in dedupe(prev_done + done, 10**6)], 10, label="earlier steps",
        keep_tail=True)
    res = [[f._rel_step(f"- {x.label} failed earlier{x.times()} ({x.error}); resolved: a later run succeeded "
                        f"({x.resolved_by})")] for x in f.act.resolved()][-MAX_RESOLVED:]
    add(56, "### Failures resolved", res, 11, label="resolved failures", keep_tail=True)
    # Decisions
    dec = dedupe(items(f.prev.own.get("Key Decisions", "")) + f.sd.decisions, 10**6)
    add(60, "## Key Decisions", [[f"- {d}" if d.startswith("**") else f"- **Noted**: {d}"] for d in dec], 7,
        label="decisions", keep_tail=True)
    # Files Changed
    fc = [[f"- `{f.rel(path)}`" + (f": {'; '.join(rs[-MAX_REASONS:])}" if rs else "")]
          for path, rs in f.changed.items()]
    fc = [[f"- {x}"] for x in items(f.prev.own.get("Files Changed", ""))
          if x.startswith("`") and not any(x.startswith(f"`{f.rel(p)}`") for p in f.changed)] + fc
    add(70, "## Files Changed", fc, 9, label="files", keep_tail=True)
    # Next Steps
    add(80, "## Next Steps", [[f"{n}. {x}"] for n, x in enumerate(f.next_steps(), 1)], 2, label="steps")
    # Critical Context
    add(90, "## Critical Context", [[f"- {c}"] for c in f.context()], 12, label="notes")
    # carried blocks of a previous summary, each in its section's place (after its own lines)
    own = {b.heading[0][3:] for b in out if b.heading and b.heading[0].startswith("## ")}
    for b in f.prev.blocks:
        order = _ORDER.get(b.target, 95) + 5
        head = [] if b.target in own else [f"## {b.target}"]
        own.add(b.target)
        add(order, head, [f._reconciled_block(b)], 13 if b.rank < 60 else 9)
    # Read Set
    earlier_reads = f.prev.own.get("Read Set", "")
    if f.reads or earlier_reads.strip():
        for r in f.reads:
            r.path = f.rel(r.path)
        add(100, "## Read Set", [[ln] for ln in ledger.render(f.reads, earlier_reads)], 14, label="files read",
            keep_tail=True)
    return out


def render(f: Facts, budget: int = SUMMARY_BUDGET) -> str:
    """The sections in order, filled by value until ``budget`` tokens (characters / 4) are used."""
    bs = blocks(f)
    if f.prev.blocks:  # a carried previous summary: at most its share, whole blocks dropped first
        own = sum(len("\n".join(ln for e in b.entries for ln in e)) for b in bs if b.rank != 9 and b.rank != 13)
        carried_chars = max(int(PREV_SHARE * budget * CHARS_PER_TOKEN), budget * CHARS_PER_TOKEN - own)
        fit(f.prev, max(carried_chars, 1000))
        bs = blocks(f)
    left = budget * CHARS_PER_TOKEN - PREFIX_RESERVE  # the pipeline's prefix and line ends count too
    for b in sorted(bs, key=lambda b: (b.rank, b.order)):  # every section's heading and first entry
        cost = sum(len(x) + 1 for x in b.heading) + 2
        first = b.entries[-1] if b.keep_tail else b.entries[0]
        if b.label == "earlier requests" and sum(len(x) + 1 for x in first) > left // 3:
            first = _short(first, max(300, left // 3))
        need = cost + sum(len(x) + 1 for x in first)
        if need <= left or b.rank <= 2:
            b.shown = [first]
            left -= need
    for b in sorted(bs, key=lambda b: (b.rank, b.order)):
        if not b.shown:
            continue
        rest = b.entries[:-1][::-1] if b.keep_tail else b.entries[1:]
        cap = int(REQUESTS_SHARE * budget * CHARS_PER_TOKEN) if b.label == "earlier requests" else left
        fits = sum(len(x) + 1 for e in rest for x in e) <= min(cap, left)
        used = 0
        for k, e in enumerate(rest):
            if b.label == "earlier requests" and k >= 1 and not fits:  # older ones shortened before recent ones
                e = _short(e, 300 if k < 4 else 160)
            cost = sum(len(x) + 1 for x in e)
            if cost > left or used + cost > cap:
                b.left_out = len(rest) - k
                break
            b.shown.append(e)
            left -= cost
            used += cost
        if b.keep_tail:
            b.shown.reverse()
    lines: list[str] = []
    for b in sorted(bs, key=lambda b: b.order):
        if not b.shown and b.heading:
            if b.rank <= 12 and b.heading[0].startswith("## "):
                lines += ["", *b.heading, f"- ({len(b.entries)} {b.label} left out for the summary budget)"]
            continue
        if not b.shown:
            continue
        if b.heading:
            lines += ["", *b.heading]
        mark = [f"- ({b.left_out} {b.label} left out for the summary budget)"] if b.left_out else []
        if b.keep_tail:
            lines += mark
        for e in b.shown:
            lines += e
        if not b.keep_tail:
            lines += mark
    return "\n".join(ln for ln in lines).strip() + "\n"



#: where each section goes in the summary
_ORDER = {"Goal": 10, "Current State": 20, "User Requests": 30, "Constraints & Preferences": 40, "Progress": 50,
          "Key Decisions": 60, "Files Changed": 70, "Next Steps": 80, "Critical Context": 90, "Read Set": 100}


def _short(entry: list[str], limit: int) -> list[str]:
    """An entry shortened to one line of ``limit`` characters, the clip marked."""
    text = " ".join(x.strip() for x in entry)
    if len(text) <= limit:
        return entry
    return [one_line(text, limit) + f" [shortened from {len(text):,} characters]"]


