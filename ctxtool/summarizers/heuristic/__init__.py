"""The offline, deterministic summarizer: seed 003's structured Markdown built from the
transcript itself, meant as a handoff another agent can resume from.

It reads the messages being summarized (agent-visible only, as the seeds prescribe) and
writes: every user request verbatim (:mod:`.requests`; injected content is never a request),
the user's constraints quoted, what was done with each command's result, failures with their
error and whether they were resolved (:mod:`.tools`), decisions as whole sentences with
rejected designs marked (:mod:`.decisions`), the values the assistant relied on
(:mod:`.values`), the files read with their size and sha256 (:mod:`.ledger`), and the open
tool calls as next steps. A previous summary (incremental compaction, or one found among the
summarized messages) is carried: merged section by section where its sections are known,
quoted whole otherwise, whole sections dropped only when over the budget (:mod:`.previous`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...model import Message, injected_kind
from ..prompt import clip, format_retain, parse_retain
from . import decisions, ledger, plan, requests, tools, values
from .previous import EARLIER, SECTIONS, Previous, fit, parse_previous
from .text import (
    dedupe,
    items,
    one_line,
    parse_sections,
    parse_subsections,
    sentences,
    split_headings,
    verbatim_item,
)

if TYPE_CHECKING:
    from .. import SummaryRequest

__all__ = ["SECTIONS", "HeuristicSummarizer", "create", "parse_sections", "parse_subsections", "retain_section",
           "structured_summary"]

VERSION = 2
STATEMENT_CLIP = 600
MAX_CONSTRAINTS = 14
MAX_BLOCKED = 6
MAX_RESOLVED = 10
MAX_MISSED = 8
PREV_MIN = 6000  # characters of a previous summary always carried whole
PREV_MAX = 40000  # ... and never more than this
PREV_SHARE = 0.6  # the summary (with what it carries) at most this share of what it replaces
REQUESTS_TITLE = "User requests, in order (verbatim)"


def create(kind: str = "heuristic", **options: Any) -> HeuristicSummarizer:
    return HeuristicSummarizer()


class HeuristicSummarizer:
    name = "heuristic"
    context_window = 10**12  # reads messages, not a prompt: never chunked

    def settings(self) -> dict[str, Any]:
        return {"kind": "heuristic", "version": VERSION}

    def __repr__(self) -> str:  # stable across runs: a shard's settings hash (a re-run resumes)
        return f"HeuristicSummarizer({self.settings()!r})"

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


def _chars(m: Message) -> int:
    return sum(len(b.text) + len(b.arguments_text()) for b in m.content)


def _previous(msgs: Sequence[Message], previous_summary: str | None) -> tuple[Previous, int]:
    """The previous summaries (the one given and any among the messages), parsed, and their size."""
    texts = [previous_summary] if previous_summary and previous_summary.strip() else []
    prev = Previous(at=-1 if texts else None)
    for i, m in enumerate(msgs):
        if m.role == "user" and injected_kind(m) == "summary":
            texts.append("\n".join(b.text for b in m.content if b.type == "text"))
            prev.at = i if prev.at is None else prev.at
    for t in texts:
        p = parse_previous(t)
        for name, body in p.own.items():
            prev.own[name] = f"{prev.own[name]}\n\n{body}" if name in prev.own else body
        prev.blocks.extend(p.blocks)
    return prev, sum(len(t) for t in texts)


def structured_summary(
    msgs: Sequence[Message],
    previous_summary: str | None = None,
    *,
    open_calls: Sequence[str] = (),
    instructions: str | None = None,
    directives: Sequence[str] = (),
    split_turn: bool = False,
) -> str:
    prev, prev_chars = _previous(msgs, previous_summary)
    reqs, constraints = requests.collect(msgs)
    act = tools.activity(msgs)
    sd = decisions.said(msgs)
    facts = _Facts(msgs, prev, reqs, constraints, act, sd, values.values(msgs), ledger.read_set(msgs),
                   open_calls, instructions, directives, split_turn)
    if prev.blocks:  # what it carries is fitted into what is left of the budget
        blocks, prev.blocks = prev.blocks, []
        own = len(facts.render())
        prev.blocks = blocks
        replaced = sum(_chars(m) for m in msgs) + prev_chars
        fit(prev, max(PREV_MIN, min(PREV_MAX, int(PREV_SHARE * replaced) - own)))
    return facts.render()


@dataclass(slots=True)
class _Facts:
    """What was extracted, and its rendering as the sections of the summary."""

    msgs: Sequence[Message]
    prev: Previous
    reqs: list[requests.Request]
    constraints: list[str]
    act: tools.Activity
    sd: decisions.Said
    vals: dict[str, list[str]]
    reads: list[ledger.Read]
    open_calls: Sequence[str]
    instructions: str | None
    directives: Sequence[str]
    split_turn: bool

    def _own(self, name: str) -> tuple[str, dict[str, str]]:
        return split_headings(self.prev.own.get(name, ""), 3)

    def _carried(self, name: str) -> list[str]:
        out: list[str] = []
        for b in self.prev.in_section(name):
            out.extend(b.lines())
        return out

    def render(self) -> str:
        lines: list[str] = []
        for name, part in (("Goal", self.goal), ("Constraints & Preferences", self.constraints_section),
                           ("Progress", self.progress), ("Key Decisions", self.decisions_section),
                           ("Next Steps", self.next_steps), ("Critical Context", self.context),
                           ("Read Set", self.read_set)):
            body = part()
            if body is None:
                continue
            lines += ["", f"## {name}", *body, *self._carried(name)]
        return "\n".join(lines).strip() + "\n"

    # -- sections --------------------------------------------------------------------------
    def goal(self) -> list[str]:
        lead, subs = self._own("Goal")
        goal_items = [x for x in items(lead) if x != "Later requests, in order:"]  # (the label of version 1)
        earlier_reqs = items(subs.get(REQUESTS_TITLE, ""))
        out: list[str] = []
        reqs = list(self.reqs)
        if goal_items:
            out += [ln for g in goal_items for ln in verbatim_item(g)]
        elif reqs and (self.prev.at is None or reqs[0].index < self.prev.at):  # the first request came first
            out += verbatim_item(reqs.pop(0).text, prefix="")
        elif self.prev.at is not None:
            out.append("- Continue the work of the earlier summary (carried below)")
        else:
            out.append("- (no user request in the summarized part)")
        if self.instructions and self.instructions.strip():
            out.append(f"- Summary focus requested: {one_line(self.instructions, 300)}")
        listed = earlier_reqs + [("(correction) " if r.correction else "") + r.text for r in reqs]
        if listed:
            out += ["", f"### {REQUESTS_TITLE}"]
            for r in listed:
                out += verbatim_item(r)
        return out

    def constraints_section(self) -> list[str]:
        cons = dedupe(items(self.prev.own.get("Constraints & Preferences", "")) + self.constraints, 10**6)
        if len(cons) > MAX_CONSTRAINTS:
            half = MAX_CONSTRAINTS // 2
            cons = cons[:half] + [f"({len(cons) - 2 * half} more in the requests above)"] + cons[-half:]
        return [f"- {c}" for c in cons] or ["- (none stated)"]

    def progress(self) -> list[str]:
        lead, subs = self._own("Progress")
        out = ["### Done"]
        done = list(self.act.done)
        if self.act.explored:
            done.append(f"Explored with {self.act.explored} read-only commands (search, listing, viewing); "
                        "files read are in the Read Set")
        done_items = dedupe([x for x in items(subs.get("Done", "")) if not x.startswith("(and ")] + done, 10**6)
        if len(done_items) > tools.MAX_DONE:
            skipped = len(done_items) - tools.MAX_DONE
            done_items = [f"(and {skipped} earlier steps; files changed are listed below)"] + done_items[-tools.MAX_DONE:]
        out += [f"- [x] {d}" for d in done_items] or ["- [x] (nothing completed yet)"]
        out += ["", "### In Progress"]
        earlier = [x for x in items(subs.get("In Progress", "")) if not x.startswith(("(", "[ ] ("))]
        if self.reqs:
            out += [f"- [ ] {x if x.startswith('(earlier)') else '(earlier) ' + one_line(x, 300)}" for x in earlier[-3:]]
            if len(self.reqs) > 1 or earlier:
                current = one_line(self.reqs[-1].text, 300)
            else:  # the only request is the goal: say where the work stands instead of repeating it
                first = sentences(self.sd.statements[-1]) if self.sd.statements else []
                current = "The goal above" + (f"; latest state: {one_line(first[0], 240)}" if first else "")
            out.append(f"- [ ] {current}" + (" (continued in the kept messages)" if self.split_turn else ""))
        else:
            out += [f"- [ ] {x}" for x in earlier] or ["- [ ] (see the kept messages)"]
        steps = plan.latest_plan(self.msgs) or [ln for ln in subs.get(plan.TITLE, "").splitlines() if ln.strip()]
        if steps:  # the latest plan, or the one the previous summary carried
            out += ["", f"### {plan.TITLE}", *steps]
        out += ["", "### Blocked"]
        blocked = dedupe([f"{f.label} failed{f.times()}: {f.error}" for f in self.act.blocked()], MAX_BLOCKED,
                         keep="last")
        out += [f"- {b}" for b in blocked] or ["- (none)"]
        return out

    def decisions_section(self) -> list[str]:
        dec = dedupe(items(self.prev.own.get("Key Decisions", "")) + self.sd.decisions, 10**6)
        dec = dec[-decisions.MAX_DECISIONS:]
        return [f"- {d}" if d.startswith("**") else f"- **Noted**: {d}" for d in dec] or ["- (none recorded)"]

    def next_steps(self) -> list[str]:
        steps = [f"Complete the pending tool call {c} (it had not returned when the history was compacted)"
                 for c in self.open_calls]
        steps.extend(dedupe(self.sd.next_hints, 4, keep="last"))
        blocked = self.act.blocked()
        if blocked:
            steps.append(f"Resolve: {blocked[-1].label} failed: {blocked[-1].error}")
        if self.reqs and (len(self.reqs) > 1 or not steps):
            steps.append(f"Continue with the latest request: {one_line(self.reqs[-1].text, 200)}")
        if not steps:
            steps = items(self.prev.own.get("Next Steps", "")) or ["Continue from the kept messages that follow this summary"]
        steps += [f"Keep in mind: {d}" for d in self.directives]
        return [f"{i}. {s}" for i, s in enumerate(steps, 1)]

    def context(self) -> list[str]:
        ctx = [x for x in items(self.prev.own.get("Critical Context", ""))
               if not x.startswith(("Summarized ", "Tool calls in the summarized part", EARLIER))][-8:]
        ctx += values.render(self.vals)
        st = self.sd.statements
        if st:
            # head and tail: a long statement ends with its conclusion
            ctx.append("Last assistant statement: " + one_line(clip(st[-1], STATEMENT_CLIP), STATEMENT_CLIP + 80))
            if len(st) > 1:
                ctx.append("Before that: " + one_line(clip(st[-2], STATEMENT_CLIP // 2), STATEMENT_CLIP // 2 + 80))
        ctx += [f"{f.label} failed earlier{f.times()} ({f.error}); resolved: later succeeded ({f.resolved_by})"
                for f in self.act.resolved()][-MAX_RESOLVED:]
        if self.act.missed:
            ctx.append("Looked for, not found or failed: " + "; ".join(dedupe(self.act.missed, MAX_MISSED, keep="last")))
        if self.act.tool_counts:
            top = sorted(self.act.tool_counts.items(), key=lambda kv: (-kv[1], kv[0]))[:8]
            ctx.append("Tool calls in the summarized part: " + ", ".join(f"{n} ×{c}" for n, c in top))
        ctx.append(f"Summarized {len(self.msgs)} messages ({len(self.reqs)} user requests)")
        if self.prev.dropped:
            ctx.append("Left out of the earlier summary for size: " + "; ".join(self.prev.dropped))
        return [f"- {c}" for c in dedupe(ctx, 30)]

    def read_set(self) -> list[str] | None:
        earlier = self.prev.own.get("Read Set", "")
        if not self.reads and not earlier.strip():
            return None
        return ledger.render(self.reads, earlier)


def retain_section(msgs: Sequence[Message], directives: Sequence[str], previous_summary: str | None) -> str:
    """Seed 001 <retain>: tool output refs, failed commands, and what the directives ask for."""
    out: list[str] = []
    if previous_summary:
        r, _ = parse_retain(previous_summary)
        out.extend(items(r))
    for m in msgs:
        ref = m.metadata.output_ref
        if isinstance(ref, dict) and ref.get("id"):
            out.append(f"tool output ref {ref['id']}")
    for d in directives:
        out.append(f"(directive) {d}")
    return "\n".join(f"- {x}" for x in dedupe(out, 40)) if out else "- (nothing beyond the summary)"
