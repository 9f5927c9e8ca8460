"""The model registry: context window, max output, prices and encoding per model (seed 004).

Shipped in ``ctxtool/data/models.json``; a user file (``$CTXTOOL_MODELS``, else
``<config dir>/models.json``, same shape) adds or overrides entries.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from .errors import CtxtoolError, ExitCode


@dataclass(frozen=True, slots=True)
class ModelInfo:
    name: str
    provider: str
    context_window: int
    max_output: int
    input_price: float  # USD per 1M input tokens
    output_price: float  # USD per 1M output tokens
    encoding: str

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "provider": self.provider,
            "context_window": self.context_window,
            "max_output": self.max_output,
            "input_price": self.input_price,
            "output_price": self.output_price,
            "encoding": self.encoding,
        }


def user_models_file() -> Path:
    env = os.environ.get("CTXTOOL_MODELS")
    if env:
        return Path(env).expanduser()
    from .paths import config_dir

    return config_dir() / "models.json"


@functools.lru_cache(maxsize=4)
def _load(user_file: str) -> dict[str, ModelInfo]:
    data = json.loads(resources.files("ctxtool").joinpath("data/models.json").read_text("utf-8"))
    entries: dict[str, dict[str, Any]] = dict(data["models"])
    p = Path(user_file)
    if p.is_file():
        try:
            user = json.loads(p.read_text("utf-8"))
        except (OSError, ValueError) as e:
            raise CtxtoolError(f"cannot read model registry: {e}", path=str(p), code=ExitCode.INPUT) from e
        for name, info in (user.get("models", user) or {}).items():
            if isinstance(info, dict):
                entries[name] = {**entries.get(name, {}), **info}
    out = {}
    for name, spec in entries.items():
        out[name] = ModelInfo(
            name=name,
            provider=str(spec.get("provider", "")),
            context_window=int(spec.get("context_window", 0)),
            max_output=int(spec.get("max_output", 0)),
            input_price=float(spec.get("input_price", 0.0)),
            output_price=float(spec.get("output_price", 0.0)),
            encoding=str(spec.get("encoding", "o200k_base")),
        )
    return out


def models() -> dict[str, ModelInfo]:
    return _load(str(user_models_file()))


def lookup(name: str | None) -> ModelInfo | None:
    """Exact name, else the longest registered name that prefixes it (dated snapshots)."""
    if not name:
        return None
    reg = models()
    n = name.strip()
    if n in reg:
        return reg[n]
    base = n.split("/")[-1]
    if base in reg:
        return reg[base]
    best = None
    for k in reg:
        if base.startswith(k) and (best is None or len(k) > len(best)):
            best = k
    return reg[best] if best else None


def require(name: str) -> ModelInfo:
    info = lookup(name)
    if info is None:
        raise CtxtoolError(
            f"unknown model {name!r}: not in the registry (add it to {user_models_file()})", code=ExitCode.USAGE
        )
    return info
