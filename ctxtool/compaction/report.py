"""Typed reports of a compaction: one per transcript, one per file."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

STATUSES = ("compacted", "not_needed", "nothing_to_cut", "not_smaller", "planned", "error")


@dataclass(slots=True)
class RecordReport:
    """What happened to one transcript."""

    label: str
    index: int
    id: str | None
    status: str = "not_needed"
    reason: str = ""
    format: str = ""
    trigger: str = ""
    context_tokens: int = 0
    context_window: int | None = None  # the window the trigger decided with (None: unknown)
    window_source: str = "none"  # where it came from: flag | file:PATH | env:NAME | transcript | registry:NAME | none
    limit: int | None = None
    tokens_before: int = 0
    tokens_after: int = 0
    messages_before: int = 0
    messages_after: int = 0
    messages_removed: int = 0
    summarized_messages: int = 0
    kept_messages: int = 0
    summary_tokens: int = 0
    prompt_tokens: int = 0
    summary_calls: int = 0
    chunks: int = 0
    incremental: bool = False
    fallback_used: bool = False
    retention: float | None = None  # what the compacted transcript kept (ctxtool.score), when compacted
    first_kept_id: str | None = None
    split_turn: bool = False
    cut: dict[str, Any] | None = None
    error: str | None = None
    seconds: float = 0.0
    read_set: list[dict[str, Any]] = field(default_factory=list)  # files read in the summarized part (the ledger)
    disagreements: list[dict[str, Any]] = field(default_factory=list)  # a model summary's claims the records contradict

    @property
    def ratio(self) -> float | None:
        if self.status != "compacted" or not self.tokens_after:
            return None
        return self.tokens_before / self.tokens_after

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        r = self.ratio
        d["ratio"] = round(r, 3) if r is not None else None
        d["seconds"] = round(self.seconds, 4)
        return d


@dataclass(slots=True)
class CompactReport:
    """The result of compacting one file (or several: ``compact_paths``)."""

    path: str
    output: str | None
    format: str = ""
    output_format: str = ""
    summarizer: str = "heuristic"
    dry_run: bool = False
    records: list[RecordReport] = field(default_factory=list)
    seconds: float = 0.0
    cache_hits: int = 0
    cache_misses: int = 0
    jobs: int = 1
    bytes_before: int | None = None
    bytes_after: int | None = None
    summaries: list[str | None] = field(default_factory=list)  # per record (None: unchanged)
    skipped: list[str] = field(default_factory=list)  # unreadable records dropped by --on-error skip

    def count(self, status: str) -> int:
        return sum(1 for r in self.records if r.status == status)

    @property
    def tokens_before(self) -> int:
        return sum(r.tokens_before for r in self.records if r.status == "compacted")

    @property
    def tokens_after(self) -> int:
        return sum(r.tokens_after for r in self.records if r.status == "compacted")

    @property
    def ratio(self) -> float | None:
        return self.tokens_before / self.tokens_after if self.tokens_after else None

    @property
    def retention(self) -> float | None:
        """The mean retention of the compacted records (``ctxtool.score``)."""
        rs = [r.retention for r in self.records if r.status == "compacted" and r.retention is not None]
        return sum(rs) / len(rs) if rs else None

    @property
    def records_per_second(self) -> float | None:
        return len(self.records) / self.seconds if self.seconds > 0 else None

    def to_json(self) -> dict[str, Any]:
        r = self.ratio
        rps = self.records_per_second
        return {
            "path": self.path,
            "output": self.output,
            "format": self.format,
            "output_format": self.output_format,
            "summarizer": self.summarizer,
            "dry_run": self.dry_run,
            "records": len(self.records),
            "compacted": self.count("compacted"),
            "not_needed": self.count("not_needed") + self.count("nothing_to_cut"),
            "not_smaller": self.count("not_smaller"),
            "planned": self.count("planned"),
            "errors": self.count("error"),
            "skipped": len(self.skipped),
            "skipped_records": self.skipped,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "ratio": round(r, 3) if r is not None else None,
            "retention": round(self.retention, 4) if self.retention is not None else None,
            "bytes_before": self.bytes_before,
            "bytes_after": self.bytes_after,
            "seconds": round(self.seconds, 4),
            "records_per_second": round(rps, 2) if rps is not None else None,
            "cache_hits": self.cache_hits,
            "cache_misses": self.cache_misses,
            "jobs": self.jobs,
            "per_record": [x.to_json() for x in self.records],
        }
