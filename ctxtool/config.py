"""Settings with their defaults (each the value of the system it comes from), resolved in one place.
Later wins: built-in defaults, then ``ctxtool.toml`` (or ``[tool.ctxtool]`` in ``pyproject.toml``)
in the working directory or its parents, then ``CTXTOOL_*`` variables, then flags. Keys are
``section.name``, the variable ``CTXTOOL_SECTION_NAME`` (``CTXTOOL_COMPACTION_RESERVE_TOKENS=8192``);
``ctxtool config`` prints every value and where it came from."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import CtxtoolError, Failure


@dataclass(frozen=True, slots=True)
class Setting:
    key: str
    default: Any
    type: type
    help: str


_S = Setting
SETTINGS: tuple[Setting, ...] = (
    # compaction (the Go agent's compact.Config, pi, adk-code)
    _S("compaction.max_messages", 50, int, "compact at this many messages when no token limit is known (Go agent MaxMessages)"),
    _S("compaction.max_tokens", 8000, int, "token limit when no context window is known (Go agent MaxTokens)"),
    _S("compaction.keep_recent", 5, int, "messages kept when no token budget is given (Go agent KeepRecent)"),
    _S("compaction.keep_recent_tokens", 20000, int, "tokens kept verbatim after a cut (pi, Go agent)"),
    _S("compaction.reserve_tokens", 16384, int, "tokens reserved for the response: compact at window - reserve (pi, Go agent)"),
    _S("compaction.tool_call_cutoff", 10, int, "visible tool results before archiving (Go agent ToolCallCutoff)"),
    _S("compaction.tool_summary_strategy", "llm", str, "summary of archived tool results: llm (the configured summarizer), heuristic or off"),
    _S("compaction.auto_compact", True, bool, "compact automatically when the limit is reached (Go agent AutoCompact)"),
    _S("compaction.enabled", True, bool, "compaction enabled"),
    _S("compaction.threshold_ratio", 0.8, float, "ratio policy: compact at this share of the window (tool-output cache spec)"),
    _S("compaction.compact_threshold", 0.70, float, "hard-stop policy: compact at this share of the window (adk-code: 70%)"),
    _S("compaction.hard_limit", 0.95, float, "hard-stop policy: the agent stops at this share of the window (adk-code: 95%)"),
    _S("compaction.retain_last_turns", 1, int, "turns kept after a retain-layout summary (retainLastTurns)"),
    _S("compaction.keep_last_messages", 10, int, "messages kept after an initial-layout summary (adk-code)"),
    _S("compaction.context_window", 0, int, "context window in tokens for compaction (0: unset)"),
    _S("compaction.layout", "summary", str, "summary (pi, Go agent), retain (<retain>/<summary>) or initial (adk-code)"),
    _S("context_window", 0, int, "context window in tokens (0: unset)"),
    _S("model", "", str, "agent model name (registry lookup for the context window)"),
    # tool output limits (the Go agent's ToolOutputLimits, the tool-output cache spec, adk-code)
    _S("tool_output.max_lines", 2000, int, "lines kept of a tool output"),
    _S("tool_output.max_bytes", 50 * 1024, int, "UTF-8 bytes kept of a tool output"),
    _S("tool_output.max_chars", 200 * 1024, int, "characters (code points) kept of a tool output"),
    _S("tool_output.spill_threshold", 200 * 1024, int, "above this many characters the whole output moves to the cache (spill)"),
    _S("tool_output.mode", "head_tail", str, "how a cut output is kept: head or head_tail"),
    _S("tool_output.max_line_length", 0, int, "each line cut at this many characters (2000 in the view preset; 0: off)"),
    _S("tool_output.head_lines", 0, int, "first lines kept by head_tail (128 in the head-tail preset; 0: derived from max_lines)"),
    _S("tool_output.tail_lines", 0, int, "last lines kept by head_tail (128 in the head-tail preset; 0: derived from max_lines)"),
    _S("tool_output.context_budget_tokens", 0, int, "token budget of trim (0: clamp(window*0.25, 20k, 60k))"),
    # context size and history window (AgentCore.Context)
    _S("context.warning_chars", 200_000, int, "warning at this many characters of context since the last compaction"),
    _S("context.critical_chars", 400_000, int, "critical at this many characters of context since the last compaction"),
    _S("window.max_messages", 100, int, "messages kept by window"),
    _S("window.max_chars", 500_000, int, "characters kept by window"),
    _S("window.strategy", "sliding", str, "window strategy: sliding or bookends"),
    _S("window.keep_first_user", True, bool, "window keeps the first user message"),
    # instructions (adk-code's AGENTS.md hierarchy)
    _S("instructions.max_bytes", 32 * 1024, int, "cap on the merged AGENTS.md text in bytes"),
    # summarizer (compaction)
    _S("summarizer.kind", "heuristic", str, "heuristic, openai, anthropic or command"),
    _S("summarizer.model", "", str, "summary model; defaults to the agent's"),
    _S("summarizer.base_url", "", str, "endpoint for openai/anthropic summarizers"),
    _S("summarizer.command", "", str, "program for the command summarizer (stdin: prompt, stdout: summary)"),
    _S("summarizer.timeout", 120.0, float, "seconds per request"),
    _S("summarizer.retries", 4, int, "retries on 429/5xx/connection errors"),
    _S("summarizer.context_window", 0, int, "summary model window (0: registry or 128k)"),
    _S("summarizer.max_tokens", 4096, int, "longest summary asked of the model (tokens)"),
    _S("tokenizer", "heuristic", str, "heuristic, o200k_base or cl100k_base"),
    _S("cache_dir", "", str, "ref cache directory (default: the user cache directory)"),
)
BY_KEY = {s.key: s for s in SETTINGS}


_MORE: list[Callable[[], Iterable[Setting]]] = []  # sources of settings declared elsewhere


def add_settings(source: Callable[[], Iterable[Setting]]) -> None:
    """Take the settings ``source()`` gives (read each time a config is resolved) into the table:
    :mod:`ctxtool.policies` adds the keys registered trigger policies declare."""
    _MORE.append(source)


def all_settings() -> tuple[Setting, ...]:
    """:data:`SETTINGS` plus the keys registered trigger policies declare (ctxtool.policies)."""
    return SETTINGS + tuple(s for more in _MORE for s in more() if s.key not in BY_KEY)


@dataclass(frozen=True, slots=True)
class Resolved:
    value: Any
    source: str  # default | file:<path> | env:<NAME> | flag


def _coerce(s: Setting, raw: Any, where: str) -> Any:
    try:
        if s.type is bool:
            if isinstance(raw, bool):
                return raw
            v = str(raw).strip().lower()
            if v in ("1", "true", "yes", "on"):
                return True
            if v in ("0", "false", "no", "off"):
                return False
            raise ValueError(raw)
        return s.type(raw)
    except (TypeError, ValueError) as e:
        raise CtxtoolError(f"{s.key}: expected {s.type.__name__}, got {raw!r}", path=where, kind=Failure.USAGE) from e


def find_config_file(start: Path | None = None) -> tuple[Path, dict[str, Any]] | None:
    """``ctxtool.toml``, else a ``pyproject.toml`` with ``[tool.ctxtool]``, in ``start`` or its parents."""
    env = os.environ.get("CTXTOOL_CONFIG")
    if env:
        p = Path(env)
        return p, _read_toml(p)
    d = (start or Path.cwd()).resolve()
    for cand in (d, *d.parents):
        p = cand / "ctxtool.toml"
        if p.is_file():
            return p, _read_toml(p)
        pp = cand / "pyproject.toml"
        if pp.is_file() and (raw := _bytes(pp)) != b"":  # b"": never names ctxtool, not parsed
            data = _read_toml(pp, raw)
            tool = data.get("tool", {}).get("ctxtool")
            if isinstance(tool, dict):
                return pp, tool
    return None


def _bytes(p: Path) -> bytes | None:
    """A ``pyproject.toml``'s bytes when they may hold a ``[tool.ctxtool]`` table (the word is
    in them), b"" when they cannot (most projects' files are not parsed at all: about 5 ms a
    run), None when unreadable (parsed, to say why)."""
    try:
        data = p.read_bytes()
    except OSError:
        return None
    return data if b"ctxtool" in data else b""


def _read_toml(p: Path, raw: bytes | None = None) -> dict[str, Any]:
    import tomllib  # only when there is a file to read

    try:
        return tomllib.loads((p.read_bytes() if raw is None else raw).decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise CtxtoolError(f"cannot read config: {e}", path=str(p), kind=Failure.USAGE) from e


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}".replace("-", "_")
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


class Config:
    """Resolved settings: ``cfg["compaction.reserve_tokens"]``, ``cfg.source(key)``."""

    def __init__(self, flags: dict[str, Any] | None = None, start: Path | None = None) -> None:
        table = all_settings()
        by_key = {s.key: s for s in table}
        vals: dict[str, Resolved] = {s.key: Resolved(s.default, "default") for s in table}
        found = find_config_file(start)
        if found:
            path, data = found
            for k, v in _flatten(data).items():
                if k not in by_key:
                    raise CtxtoolError(f"unknown setting {k!r}", path=str(path), kind=Failure.USAGE)
                vals[k] = Resolved(_coerce(by_key[k], v, str(path)), f"file:{path}")
        for s in table:
            name = "CTXTOOL_" + s.key.replace(".", "_").upper()
            if name in os.environ:
                vals[s.key] = Resolved(_coerce(s, os.environ[name], name), f"env:{name}")
        for k, v in (flags or {}).items():
            if v is None:
                continue
            if k not in by_key:
                raise KeyError(k)
            vals[k] = Resolved(_coerce(by_key[k], v, "flag"), "flag")
        self._vals = vals
        self._help = {k: s.help for k, s in by_key.items()}

    def __getitem__(self, key: str) -> Any:
        return self._vals[key].value

    def source(self, key: str) -> str:
        return self._vals[key].source

    def chosen(self, key: str, flag: Any = None) -> Any:
        """What the user chose for ``key``: the flag's value, else the setting when a file or the
        environment set it, else None (the caller's own rule decides, e.g. the model's encoding)."""
        if flag:
            return flag
        return self[key] if self.source(key) != "default" else None

    def items(self) -> list[tuple[str, Resolved]]:
        return list(self._vals.items())

    def to_json(self) -> dict[str, Any]:
        return {k: {"value": r.value, "source": r.source, "help": self._help[k]} for k, r in self._vals.items()}


def load(flags: dict[str, Any] | None = None) -> Config:
    return Config(flags)
