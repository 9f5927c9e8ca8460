"""ctxtool: offline context management for LLM agent transcripts.

The public API is re-exported here lazily (PEP 562), so ``import ctxtool`` and the CLI's
start-up stay cheap::

    import ctxtool
    for t in ctxtool.read("session.jsonl"):
        report = ctxtool.stats.transcript.transcript_stats(...)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "CtxtoolError": "ctxtool.errors",
    "ExitCode": "ctxtool.errors",
    "Block": "ctxtool.model",
    "Compaction": "ctxtool.model",
    "Message": "ctxtool.model",
    "Metadata": "ctxtool.model",
    "Transcript": "ctxtool.model",
    "Usage": "ctxtool.model",
    "read": "ctxtool.formats",
    "write": "ctxtool.formats",
    "write_path": "ctxtool.formats",
    "detect": "ctxtool.formats",
    "get_tokenizer": "ctxtool.tokens.count",
    "estimate_context": "ctxtool.tokens.count",
    "find_cut": "ctxtool.history.cut",
    "check_messages": "ctxtool.history.validate",
    "Config": "ctxtool.config",
    "run_file": "ctxtool.run.runner",
    "merge_reports": "ctxtool.run.runner",
    "convert_file": "ctxtool.run.runner",
    "truncate_file": "ctxtool.tool_outputs",
    "trim_file": "ctxtool.tool_outputs",
    "restore_file": "ctxtool.tool_outputs",
    "window_file": "ctxtool.history.window",
    "repair_file": "ctxtool.history.repair",
    "usage_report": "ctxtool.usage",
}
_SUBMODULES = {
    "agent", "cache", "calibration", "compaction", "config", "errors", "export", "formats", "history", "io", "model",
    "policies", "redact", "replay", "run", "score", "stats", "summarizers", "text", "tokens", "tool_outputs", "usage",
}

__all__ = sorted([*_EXPORTS, *_SUBMODULES, "__version__"])

if TYPE_CHECKING:  # pragma: no cover
    from .config import Config as Config
    from .errors import CtxtoolError as CtxtoolError
    from .errors import ExitCode as ExitCode
    from .formats import detect as detect
    from .formats import read as read
    from .formats import write as write
    from .formats import write_path as write_path
    from .history.cut import find_cut as find_cut
    from .history.repair import repair_file as repair_file
    from .history.validate import check_messages as check_messages
    from .history.window import window_file as window_file
    from .model import Block as Block
    from .model import Compaction as Compaction
    from .model import Message as Message
    from .model import Metadata as Metadata
    from .model import Transcript as Transcript
    from .model import Usage as Usage
    from .run.runner import convert_file as convert_file
    from .run.runner import merge_reports as merge_reports
    from .run.runner import run_file as run_file
    from .tokens.count import estimate_context as estimate_context
    from .tokens.count import get_tokenizer as get_tokenizer
    from .tool_outputs.files import restore_file as restore_file
    from .tool_outputs.files import trim_file as trim_file
    from .tool_outputs.files import truncate_file as truncate_file
    from .usage import usage_report as usage_report


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    if name in _SUBMODULES:
        return importlib.import_module(f"ctxtool.{name}")
    raise AttributeError(f"module 'ctxtool' has no attribute {name!r}")
