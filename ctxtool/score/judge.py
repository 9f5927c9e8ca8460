"""``score --judge``: a model answers questions about the work from the summary alone (its first
budget tokens, as scored), one per category that has probes, and each answer is graded with the
probes' own checks. The model is any registered summarizer backend (``openai``, ``anthropic``,
``command``), called through its ``summarize`` with the judge's own system prompt."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..tokens.context import CALLED_MODEL_WINDOW
from .kinds import PROBE_KINDS
from .probes import Probe
from .text import Haystack

if TYPE_CHECKING:
    from ..summarizers import Summarizer

JUDGE_SYSTEM = (
    "You are given the context an AI coding assistant has after its conversation history was compacted. "
    "Answer the question using ONLY that context. Quote exact words, file paths, identifiers and error "
    "messages where the context has them. If the context does not say, answer: unknown."
)

QUESTIONS = {
    "recall": "What did the user ask for in this session? List the user's first request and every later "
              "request in order, quoting the user's own words.",
    "artifacts": "Which files were read or modified, and which identifiers and values (paths, URLs, versions, "
                 "ids, environment variables, function names) does the work depend on? List them exactly.",
    "continuation": "What was the assistant doing most recently, and what are the next steps? Include any "
                    "open plan or to-do items, quoted.",
    "decisions": "Which constraints, preferences or corrections did the user state (quote them), and what failed "
                 "along the way (the command or edit, its exact error message, and whether it was resolved later)?",
}
ANSWER_TOKENS = 1024
CONTEXT_MARGIN_TOKENS = 2048


@dataclass(slots=True)
class JudgeAnswer:
    category: str
    question: str
    answer: str
    probes: int
    correct: int

    @property
    def score(self) -> float | None:
        return self.correct / self.probes if self.probes else None

    def to_json(self) -> dict[str, Any]:
        s = self.score
        return {"category": self.category, "question": self.question, "answer": self.answer[:4000],
                "probes": self.probes, "correct": self.correct, "score": None if s is None else round(s, 4)}


@dataclass(slots=True)
class JudgeReport:
    backend: str
    answers: list[JudgeAnswer] = field(default_factory=list)

    @property
    def score(self) -> float | None:
        ss = [a.score for a in self.answers if a.score is not None]
        return sum(ss) / len(ss) if ss else None

    def to_json(self) -> dict[str, Any]:
        s = self.score
        return {"backend": self.backend, "score": None if s is None else round(s, 4),
                "answers": [a.to_json() for a in self.answers]}


def judge_report(model: Summarizer, probes: Sequence[Probe], after_text: str) -> JudgeReport:
    """Ask ``model`` one question per category about ``after_text``; grade the answers."""
    # lazy: start-up (loaded only when this runs: ..summarizers)
    from ..summarizers import SummaryRequest

    kinds = {k.name: k for k in PROBE_KINDS.values()}
    window = getattr(model, "context_window", 0) or CALLED_MODEL_WINDOW
    budget = max((min(window, 10**7) - ANSWER_TOKENS - CONTEXT_MARGIN_TOKENS) * 3, 4000)
    context = after_text[:budget]
    rep = JudgeReport(str(getattr(model, "name", "model")))
    for category, question in QUESTIONS.items():
        mine = [p for p in probes if kinds[p.kind].category == category]
        if not mine:
            continue
        req = SummaryRequest(system=JUDGE_SYSTEM, prompt=f"<context>\n{context}\n</context>\n\nQuestion: {question}",
                             max_tokens=ANSWER_TOKENS, options={"judge": category})
        answer = model.summarize(req)
        hay = Haystack.of([answer])
        correct = sum(1 for p in mine if kinds[p.kind].check(p, hay))
        rep.answers.append(JudgeAnswer(category, question, answer, len(mine), correct))
    return rep
