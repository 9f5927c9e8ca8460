"""ctxtool: offline context management for LLM agent transcripts. Every command's operation is a
function here, imported on first use (PEP 562), so ``import ctxtool`` stays cheap and needs
neither typer nor rich: ``ctxtool.stats_files(["session.jsonl"])``,
``ctxtool.compact_file("session.jsonl", "short.jsonl", options=ctxtool.CompactOptions(force=True))``.
The packages and what each holds: docs/architecture.md."""

from __future__ import annotations

import importlib

# typing.TYPE_CHECKING's value at run time, without importing typing here (with re and enum,
# ~10 ms): `import ctxtool` stays cheap, and the CLI imports typing with the cyclic collector
# paused (ctxtool.cli). Type checkers take a TYPE_CHECKING of the module's own as true.
TYPE_CHECKING = False

__version__ = "0.1.0"

#: public name -> (module, name there)
_EXPORTS: dict[str, tuple[str, str]] = {
    # the transcript model
    "Block": ("ctxtool.model", "Block"),
    "Compaction": ("ctxtool.model", "Compaction"),
    "Message": ("ctxtool.model", "Message"),
    "Metadata": ("ctxtool.model", "Metadata"),
    "Transcript": ("ctxtool.model", "Transcript"),
    "Usage": ("ctxtool.model", "Usage"),
    # errors and settings
    "CtxtoolError": ("ctxtool.errors", "CtxtoolError"),
    "Failure": ("ctxtool.errors", "Failure"),
    "Config": ("ctxtool.config", "Config"),
    # reading and writing
    "read": ("ctxtool.formats", "read"),
    "write": ("ctxtool.formats", "write"),
    "write_path": ("ctxtool.formats", "write_path"),
    "detect": ("ctxtool.formats", "detect"),
    "convert_file": ("ctxtool.formats.convert", "convert_file"),
    "survey_file": ("ctxtool.formats.survey", "survey_file"),
    # tokens
    "get_tokenizer": ("ctxtool.tokens.count", "get_tokenizer"),
    "estimate_context": ("ctxtool.tokens.count", "estimate_context"),
    # inspecting (stats, validate, cut, check, replay, compactions, usage)
    "stats_files": ("ctxtool.stats.files", "stats_files"),
    "validate_files": ("ctxtool.history.validate", "validate"),
    "check_messages": ("ctxtool.history.validate", "check_messages"),
    "find_cut": ("ctxtool.history.cut", "find_cut"),
    "cut_transcript": ("ctxtool.history.cut", "cut_transcript"),
    "CutSettings": ("ctxtool.history.cut", "CutSettings"),
    "cut_files": ("ctxtool.history.cut", "cut_files"),
    "cut_file": ("ctxtool.history.cut", "cut_file"),
    "check_transcript": ("ctxtool.policies.check", "check_transcript"),
    "check_files": ("ctxtool.policies.check", "check_files"),
    "replay_file": ("ctxtool.replay.core", "replay_file"),
    "compactions_files": ("ctxtool.stats.compactions", "compactions"),
    "usage_report": ("ctxtool.usage", "usage_report"),
    # changing files (truncate, trim, restore, refs, window, repair, archive, compact, redact, export)
    "truncate_file": ("ctxtool.tool_outputs.files", "truncate_file"),
    "trim_file": ("ctxtool.tool_outputs.files", "trim_file"),
    "restore_file": ("ctxtool.tool_outputs.files", "restore_file"),
    "RefCache": ("ctxtool.cache", "RefCache"),
    "referenced_refs": ("ctxtool.tool_outputs.refs", "referenced_refs"),
    "window_file": ("ctxtool.history.window", "window_file"),
    "repair_file": ("ctxtool.history.repair", "repair_file"),
    "archive_file": ("ctxtool.history.archive", "archive_file"),
    "CompactOptions": ("ctxtool.compaction.settings", "CompactOptions"),
    "compact_file": ("ctxtool.compaction.run", "compact_file"),
    "compact_paths": ("ctxtool.compaction.run", "compact_paths"),
    "redact_files": ("ctxtool.redact", "redact_files"),
    "export_path": ("ctxtool.export", "export_path"),
    "export_file": ("ctxtool.export", "export_file"),
    "export_pages": ("ctxtool.export", "export_pages"),
    "export_index": ("ctxtool.export.index", "export_index"),
    # scoring and the agent loop
    "score_files": ("ctxtool.score.core", "score_files"),
    "score_recorded_files": ("ctxtool.score.recorded", "score_recorded_files"),
    "load_instructions": ("ctxtool.agent.instructions", "load_instructions"),
    "make_transform": ("ctxtool.agent.transform", "make_transform"),
    # running any operation
    "run_file": ("ctxtool.run.runner", "run_file"),
    "merge_reports": ("ctxtool.run.operation", "merge_reports"),
}
_SUBPACKAGES = {
    "agent", "cache", "calibration", "compaction", "config", "errors", "export", "formats", "history", "io", "model",
    "policies", "redact", "replay", "run", "score", "stats", "summarizers", "text", "tokens", "tool_outputs", "usage",
}

__all__ = sorted([*_EXPORTS, *_SUBPACKAGES, "__version__"])

if TYPE_CHECKING:  # pragma: no cover
    from typing import Any

    from .agent.instructions import load_instructions as load_instructions
    from .agent.transform import make_transform as make_transform
    from .cache import RefCache as RefCache
    from .compaction.run import compact_file as compact_file
    from .compaction.run import compact_paths as compact_paths
    from .compaction.settings import CompactOptions as CompactOptions
    from .config import Config as Config
    from .errors import CtxtoolError as CtxtoolError
    from .errors import Failure as Failure
    from .export import export_file as export_file
    from .export import export_pages as export_pages
    from .export import export_path as export_path
    from .export.index import export_index as export_index
    from .formats import detect as detect
    from .formats import read as read
    from .formats import write as write
    from .formats import write_path as write_path
    from .formats.convert import convert_file as convert_file
    from .formats.survey import survey_file as survey_file
    from .history.archive import archive_file as archive_file
    from .history.cut import CutSettings as CutSettings
    from .history.cut import cut_file as cut_file
    from .history.cut import cut_files as cut_files
    from .history.cut import cut_transcript as cut_transcript
    from .history.cut import find_cut as find_cut
    from .history.repair import repair_file as repair_file
    from .history.validate import check_messages as check_messages
    from .history.validate import validate as validate_files  # noqa: F401 (a public name of its own)
    from .history.window import window_file as window_file
    from .model import Block as Block
    from .model import Compaction as Compaction
    from .model import Message as Message
    from .model import Metadata as Metadata
    from .model import Transcript as Transcript
    from .model import Usage as Usage
    from .policies.check import check_files as check_files
    from .policies.check import check_transcript as check_transcript
    from .redact import redact_files as redact_files
    from .replay.core import replay_file as replay_file
    from .run.operation import merge_reports as merge_reports
    from .run.runner import run_file as run_file
    from .score.core import score_files as score_files
    from .score.recorded import score_recorded_files as score_recorded_files
    from .stats.compactions import compactions as compactions_files  # noqa: F401 (a public name of its own)
    from .stats.files import stats_files as stats_files
    from .tokens.count import estimate_context as estimate_context
    from .tokens.count import get_tokenizer as get_tokenizer
    from .tool_outputs.files import restore_file as restore_file
    from .tool_outputs.files import trim_file as trim_file
    from .tool_outputs.files import truncate_file as truncate_file
    from .tool_outputs.refs import referenced_refs as referenced_refs
    from .usage import usage_report as usage_report


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        module, attr = _EXPORTS[name]
        return getattr(importlib.import_module(module), attr)
    if name in _SUBPACKAGES:
        return importlib.import_module(f"ctxtool.{name}")
    raise AttributeError(f"module 'ctxtool' has no attribute {name!r}")
