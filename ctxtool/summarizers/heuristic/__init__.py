"""The offline, deterministic summarizer: a handoff another agent can continue from, built from
the transcript itself (agent-visible messages only) and fitted to a token budget. It says only
what the transcript shows, one module per section (requests, plan, tools, decisions, values,
ledger, previous), filled in order of value until the budget is spent. What each section holds
and its evidence rules: docs/architecture.md, "Compaction and summaries"."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...model import Message, injected_kind
from ...text import lazyre
from ...text.prose import one_line
from ...tokens.heuristic import CHARS_PER_TOKEN
from ..prompt import SUMMARY_BUDGET, clip, extract_files, format_retain, parse_retain
from . import check, decisions, ledger, plan, requests, tools, values
from .layout import MAX_REASONS, STATEMENT_CLIP, render
from .previous import EARLIER, Carried, Previous, parse_previous
from .text import dedupe, items, sentences, split_headings

if TYPE_CHECKING:
    from .. import SummaryRequest

__all__ = ["Facts", "HeuristicSummarizer", "create", "facts", "retain_section", "structured_summary"]

VERSION = 3
GOAL_CLIP = 1500
MAX_MISSED = 8
MAX_LOOKED = 8
REASON_CLIP = 160
FACTS_BUDGET = 1500  # tokens of facts handed to a summary model
_COUNTERMAND = lazyre.compile(r"\b(?:remove|delete|drop|undo|revert|stop|don'?t|do not|no need|never mind|skip|cancel)\b",
                              re.I)
_NARRATION = lazyre.compile(r"^(?:now,? )?(?:let me|i'll|i will|let's|next,? i'll)\s+", re.I)


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
            budget=int(req.options.get("summary_budget") or SUMMARY_BUDGET),
            cwd=req.options.get("cwd"),
        )
        if req.style == "retain":
            retain = retain_section(req.messages, req.options.get("retain_directives") or (), req.previous_summary)
            return format_retain(retain, body)
        return body


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
    msgs: Sequence[Message], previous_summary: str | None = None, *, budget: int = SUMMARY_BUDGET, **known: Any
) -> str:
    """The handoff summary of ``msgs`` (merged with ``previous_summary``), within about
    ``budget`` tokens; ``known``: what :func:`facts` takes (open calls, instructions ...)."""
    return facts(msgs, previous_summary, **known).render(budget)


def facts(
    msgs: Sequence[Message],
    previous_summary: str | None = None,
    *,
    open_calls: Sequence[str] = (),
    instructions: str | None = None,
    directives: Sequence[str] = (),
    split_turn: bool = False,
    cwd: str | None = None,
) -> Facts:
    """What the transcript shows, extracted once: the summary renders it, and a model's
    summary is handed it (and checked against it)."""
    prev, _ = _previous(msgs, previous_summary)
    reqs, constraints = requests.collect(msgs)
    return Facts(msgs, prev, reqs, constraints, tools.activity(msgs), decisions.said(msgs), values.values(msgs),
                 ledger.read_set(msgs), plan.latest(msgs) or plan.tracker(msgs), _files_changed(msgs), list(open_calls), instructions,
                 directives, split_turn, (cwd or "").rstrip("/"))


def _reason(text: str) -> str:
    """The reason an assistant gave before an edit: the last sentence of its text, narration
    ("Now let me") taken off."""
    ss = [x for x in sentences(text) if len(x) >= 12]
    if not ss:
        return ""
    r = _NARRATION.sub("", ss[-1]).rstrip(":").strip()
    return one_line(r[:1].upper() + r[1:], REASON_CLIP) if len(r) >= 12 else ""


def _files_changed(msgs: Sequence[Message]) -> dict[str, list[str]]:
    """Each file a successful edit changed, with the distinct reasons given near its edits."""
    results = {b.id: b for m in msgs for b in m.tool_results() if b.id}
    out: dict[str, list[str]] = {}
    said = ""
    for m in msgs:
        if m.role != "assistant":
            continue
        for b in m.content:
            if b.type == "text" and b.text.strip():
                said = b.text
            elif b.type == "tool_call":
                res = results.get(b.id or "")
                reason, said = _reason(said), ""  # a reason is what was said just before this call
                if res is None or res.is_error:
                    continue
                for f in extract_files([Message("assistant", [b])])[1]:
                    rs = out.setdefault(f, [])
                    if reason and reason not in rs:
                        rs.append(reason)
    return out


@dataclass(slots=True)
class Facts:
    """What was extracted, and its rendering as the sections of the summary."""

    msgs: Sequence[Message]
    prev: Previous
    reqs: list[requests.Request]
    constraints: list[str]
    act: tools.Activity
    sd: decisions.Said
    vals: dict[str, list[str]]
    reads: list[ledger.Read]
    plan: tuple[int, list[plan.Item]] | None
    changed: dict[str, list[str]]
    open_calls: list[str]
    instructions: str | None
    directives: Sequence[str]
    split_turn: bool
    cwd: str

    def rel(self, path: str) -> str:
        """A path relative to the session's directory (as given when it is outside it)."""
        if self.cwd and path.startswith(self.cwd + "/"):
            return path[len(self.cwd) + 1:]
        return path

    # -- what the state is -------------------------------------------------------------------
    def goal_text(self) -> str | None:
        lead, _ = split_headings(self.prev.own.get("Goal", ""), 3)
        carried = [x for x in items(lead) if x != "Later requests, in order:"]
        if carried:
            return "\n".join(carried)
        if self.reqs and (self.prev.at is None or self.reqs[0].index < self.prev.at):
            return clip(self.reqs[0].text, GOAL_CLIP)
        return None

    def later_requests(self) -> list[requests.Request]:
        """The requests after the one stated as the goal."""
        lead, _ = split_headings(self.prev.own.get("Goal", ""), 3)
        if items(lead) or not self.reqs or (self.prev.at is not None and self.reqs[0].index >= self.prev.at):
            return list(self.reqs)
        return list(self.reqs[1:])

    def done_evidence(self) -> list[str]:
        """Texts that record work as done: completed plan items, commit messages, steps done."""
        out = [it.text for it in (self.plan[1] if self.plan else []) if it.done]
        out += [f"commit \"{c.message}\"" for c in self.act.commits]
        return out

    def changed_paths(self) -> set[str]:
        paths = set(self.changed)
        return paths | {self.rel(p) for p in paths} | {p.rsplit("/", 1)[-1] for p in paths}

    def done_since(self, item: str) -> str | None:
        """The later record showing that an open item of a previous summary was done."""
        keys = _keys(re.sub(r"\([^)]*\)|\*\*", " ", item))  # its parentheses are remarks, not the item
        if len(keys) >= 2:
            for ev in self.done_evidence():
                got = _keys(ev)
                if len(keys & got) >= max(2, 0.6 * len(keys)):
                    return one_line(ev, 120)
        named = re.findall(r"[\w./-]+\.\w{1,6}\b", item)
        if named and re.search(r"\b(create|add|write|update|implement|edit|change|fix)\b", item, re.I):
            hit = [n for n in named if n in self.changed_paths() or n.rsplit("/", 1)[-1] in self.changed_paths()]
            if hit and len(hit) == len(named):
                return f"{', '.join(hit)} was changed later"
        return None

    def countermanded(self, call: str) -> str | None:
        """A user message after which this pending call is no longer wanted."""
        low = call.lower()
        for r in self.reqs[-3:]:
            if not _COUNTERMAND.search(r.text):
                continue
            for w in re.findall(r"[\w.-]+\.\w{1,6}\b|[A-Za-z_]\w{4,}", r.text):
                if w.lower() in low and w.lower() not in ("remove", "delete", "never", "cancel", "revert"):
                    return one_line(r.text, 120)
        return None

    def latest_status(self) -> str | None:
        """What happened after the latest user request, from the records (no judgement beyond them)."""
        if not self.reqs:
            return None
        i = self.reqs[-1].index
        after = self.msgs[i + 1:]
        act = tools.activity(after)
        p = plan.latest(after)
        n = len(self.reqs)
        head = f"Latest user request (request {n} under User Requests): "
        if p is not None and all(it.done for it in p[1]):
            return head + "every item of the plan recorded after it is completed"
        facts = []
        if act.commits:
            facts.append(f"committed \"{one_line(act.commits[-1].message, 80)}\"")
        edits = sum(1 for d in act.done if not d.startswith("Ran "))
        if edits:
            facts.append(f"{edits} file edit step(s)")
        for label, result in list(act.checks.values())[-2:]:
            facts.append(f"last {label}: {'failed' if result.startswith('FAILED') else 'ok'}")
        if act.blocked():
            facts.append(f"{len(act.blocked())} failure(s) still open after it")
        if facts:
            return head + "worked on after it: " + "; ".join(facts)
        if any(m.role == "assistant" and m.tool_calls() for m in after):
            return head + "looked into after it (read-only tool calls, no change)"
        if any(m.role == "assistant" for m in after):
            return head + "answered in text (no tool call after it)"
        return head + "not acted on yet in the summarized part"

    # -- for a model -----------------------------------------------------------------------------
    def brief(self, budget: int = FACTS_BUDGET) -> str:
        """The facts a model's summary is anchored on: the plan's items with their latest status,
        each run's last result, the failures (open with their error, or resolved), commits, the
        files changed with their reasons, the user's requests, what the user countermanded."""
        out: list[str] = []
        if self.plan is not None:
            out += ["Plan items (latest status):", *[it.line() for it in self.plan[1]]]
        if self.act.checks:
            out += ["Test and build runs (last result of each):",
                    *[f"- {label}: {result}" for label, result in self.act.checks.values()]]
        blocked = [f for f in self.act.blocked() if f.family not in self.act.checks]
        if blocked:
            out += ["Failed and not resolved by a later run:", *[f"- {f.label}: {f.error}" for f in blocked]]
        if self.act.resolved():
            out += ["Failed, then resolved by a later run of the same step:",
                    *[f"- {f.label}: {f.error} (resolved by {f.resolved_by})" for f in self.act.resolved()]]
        if self.act.commits:
            out += ["Commits:", *[f"- {c.line(self.rel)}" for c in self.act.commits]]
        if self.changed:
            out += ["Files changed (the reason given at the edit):",
                    *[f"- {self.rel(f)}" + (f": {'; '.join(rs[-MAX_REASONS:])}" if rs else "")
                      for f, rs in self.changed.items()]]
        if self.reqs:
            out += ["User requests, in order:", *[f"- {one_line(r.text, 300)}" for r in self.reqs]]
        status = self.latest_status()
        if status:
            out.append(status)
        gone = [c for c in self.open_calls if self.countermanded(c) is not None]
        if gone:
            out += ["Pending calls the user countermanded (not next steps):", *[f"- {c}" for c in gone]]
        text = "\n".join(out)
        return clip(text, budget * CHARS_PER_TOKEN) if text else "(no structured records in this part)"

    def check(self, summary: str) -> list[check.Disagreement]:
        """The claims of ``summary`` (a model's) that these facts contradict."""
        return check.check(self, summary)

    # -- sections ------------------------------------------------------------------------------
    def next_steps(self) -> list[str]:
        steps: list[str] = []
        if self.plan is not None:
            for it in self.plan[1]:
                if not it.done and it.status not in ("cancelled", "canceled"):
                    steps.append(f"{'Continue' if it.active else 'Then'} (plan): {one_line(it.text, 200)}")
        else:
            for x in items(self.prev.own.get("Next Steps", "")):
                if x.startswith(("Keep in mind:", "Continue with the latest request", "Complete the pending tool call")):
                    continue
                if self.done_since(x) is None:
                    steps.append(f"(from the earlier summary) {one_line(x, 200)}")
            steps += dedupe(self.sd.next_hints, 3, keep="last")
        for c in self.open_calls:
            if self.countermanded(c) is None:
                steps.append(f"Complete the pending tool call {c} (it had not returned when the history was compacted)")
        blocked = self.act.blocked()
        if blocked:
            steps.append(f"Resolve: {blocked[-1].label} failed: {blocked[-1].error}")
        status = self.latest_status() or ""
        if self.reqs and "every item of the plan" not in status:
            steps.append("Carry on with the latest user request (the last one under User Requests)")
        if not steps:
            steps.append("Continue from the kept messages that follow this summary")
        steps += [f"Keep in mind: {d}" for d in self.directives]
        return steps

    def context(self) -> list[str]:
        ctx = [x for x in items(self.prev.own.get("Critical Context", ""))
               if not x.startswith(("Summarized ", "Tool calls in the summarized part", EARLIER, "Last assistant",
                                    "Before that"))][-8:]
        ctx += values.render(self.vals)
        if len(self.sd.statements) > 1:
            ctx.append("Before that, the assistant said: "
                       + one_line(clip(self.sd.statements[-2], STATEMENT_CLIP // 2), STATEMENT_CLIP // 2 + 80))
        if self.act.looked:
            ctx.append("Last read-only commands: " + "; ".join(dedupe([one_line(x, 120) for x in self.act.looked],
                                                                       MAX_LOOKED, keep="last")))
        if self.act.missed:
            ctx.append("Looked for, not found or failed: " + "; ".join(dedupe(self.act.missed, MAX_MISSED, keep="last")))
        if self.act.tool_counts:
            top = sorted(self.act.tool_counts.items(), key=lambda kv: (-kv[1], kv[0]))[:8]
            ctx.append("Tool calls in the summarized part: " + ", ".join(f"{n} ×{c}" for n, c in top))
        ctx.append(f"Summarized {len(self.msgs)} messages ({len(self.reqs)} user requests)")
        if self.prev.dropped:
            ctx.append("Left out of the earlier summary for size: " + "; ".join(self.prev.dropped))
        return dedupe(ctx, 30)

    def _rel_step(self, step: str) -> str:
        if not self.cwd:
            return step
        return step.replace(self.cwd + "/", "")

    def _reconcile_line(self, ln: str, pending: bool = False) -> str:
        """A line of a previous summary: an open item later work did becomes done, with the record."""
        s = ln.strip()
        is_open = ("[ ]" in s or re.search(r"\((?:NEXT|next|TODO|todo|pending|in progress)\)", s)
                   or (pending and re.match(r"^[-*]\s|^\d+\.\s", s) and "[x]" not in s))
        if not is_open:
            return ln
        ev = self.done_since(re.sub(r"\[ \]|\((?:NEXT|next|TODO|todo|pending|in progress)\)", "", s))
        if ev is None:
            return ln
        core = re.sub(r"^(?:[-*]|\d+\.)\s+|\[ \]\s*(?:\(in progress\)\s*)?|\s*\((?:NEXT|next|TODO|todo|pending|in progress)\)",
                      "", s)
        return f"- [x] {core} (done since: {ev})"

    def _reconciled_block(self, b: Carried) -> list[str]:
        pending = b.target == "Next Steps"  # every item of a pending-work section is open
        text = "\n".join(self._reconcile_line(ln, pending) for ln in b.text.splitlines())
        return Carried(b.target, b.title, text, b.rank).lines()

    def render(self, budget: int = SUMMARY_BUDGET) -> str:
        """The sections in order, filled by value until ``budget`` tokens (characters / 4) are used."""
        return render(self, budget)


_STOP = frozenset("the a an and or of to in on for with from into that this it is be by as at then now next "
                  "create update add write implement use make".split())


def _keys(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9_.-]{3,}", text.lower()) if w not in _STOP}


def retain_section(msgs: Sequence[Message], directives: Sequence[str], previous_summary: str | None) -> str:
    """The tool-output cache spec <retain>: tool output refs, failed commands, and what the directives ask for."""
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
