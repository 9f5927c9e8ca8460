"""The maintained source of the model registry's windows and prices: litellm's
``model_prices_and_context_window.json`` (MIT licence, Berri AI), reduced by :func:`reduce` to the
chat models a transcript names and vendored as ``ctxtool/data/litellm_models.json`` with its
version. ``make models`` refreshes it; nothing reads the network at run time::

    python -m ctxtool.tokens.models_source LITELLM_WHEEL_OR_JSON [OUT]"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

#: litellm modes of models a conversation runs on
MODES = ("chat", "responses")
#: providers whose models litellm lists only as ``provider/name``: kept under ``name``
PREFIXED = ("gemini", "xai", "mistral", "deepseek", "moonshot", "zai", "minimax", "cerebras", "groq")
#: where a wheel holds the file
WHEEL_MEMBER = "litellm/model_prices_and_context_window_backup.json"
LICENCE = "MIT (Copyright (c) 2023 Berri AI), https://github.com/BerriAI/litellm"


def _per_million(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return round(float(v) * 1_000_000, 6)


def _entry(spec: dict[str, Any]) -> dict[str, Any] | None:
    if spec.get("mode") not in MODES:
        return None
    window = spec.get("max_input_tokens") or spec.get("max_tokens")
    inp, out = _per_million(spec.get("input_cost_per_token")), _per_million(spec.get("output_cost_per_token"))
    if not isinstance(window, int) or window <= 0 or inp is None or out is None:
        return None
    e: dict[str, Any] = {"provider": str(spec.get("litellm_provider", "")), "context_window": window,
                         "max_output": int(spec.get("max_output_tokens") or 0), "input_price": inp,
                         "output_price": out}
    write = _per_million(spec.get("cache_creation_input_token_cost"))
    read = _per_million(spec.get("cache_read_input_token_cost"))
    if write is not None:
        e["cache_write_price"] = write
    if read is not None:
        e["cache_read_price"] = read
    return e


def reduce(raw: dict[str, Any], source: dict[str, Any]) -> dict[str, Any]:
    """litellm's table -> ``{"_source": source, "models": {name: entry}}``, names sorted."""
    models: dict[str, dict[str, Any]] = {}
    prefixed: dict[str, dict[str, Any]] = {}
    for name, spec in raw.items():
        if not isinstance(spec, dict) or name == "sample_spec":
            continue
        e = _entry(spec)
        if e is None:
            continue
        if "/" not in name:
            models[name] = e
        elif name.count("/") == 1 and name.split("/")[0] in PREFIXED:
            prefixed.setdefault(name.split("/")[1], e)
    for name, e in prefixed.items():
        models.setdefault(name, e)
    return {"_source": source, "models": dict(sorted(models.items()))}


def read_source(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The table and where it came from: a litellm wheel (its version) or the JSON file."""
    if path.suffix == ".whl":
        import zipfile

        with zipfile.ZipFile(path) as z:
            raw = json.loads(z.read(WHEEL_MEMBER))
        version = path.name.split("-")[1]
        origin = f"litellm {version} (PyPI wheel {path.name}), file {WHEEL_MEMBER.rsplit('/', 1)[-1]}"
    else:
        raw = json.loads(path.read_text("utf-8"))
        origin = f"litellm model_prices_and_context_window.json ({path.name})"
    return raw, {"from": origin, "licence": LICENCE,
                 "refreshed": datetime.now(UTC).date().isoformat(), "refresh": "make models"}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    raw, source = read_source(Path(args[0]))
    out = Path(args[1]) if len(args) > 1 else Path(__file__).parent.parent / "data" / "litellm_models.json"
    data = reduce(raw, source)
    text = '{\n  "_source": ' + json.dumps(data["_source"]) + ',\n  "models": {\n' + ",\n".join(
        f"    {json.dumps(k)}: {json.dumps(v)}" for k, v in data["models"].items()) + "\n  }\n}\n"
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(text, "utf-8")
    tmp.replace(out)
    print(f"{out}: {len(data['models'])} models from {source['from']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
