"""The model registry: context window, max output, prices (USD per 1M tokens, dated where they
changed: :meth:`ModelInfo.prices` gives one day's) and encoding per model. Three layers, each
field of a later one winning (``ModelInfo.source`` says which): litellm's table
(``ctxtool/data/litellm_models.json``), ctxtool's ``ctxtool/data/models.json``, the user's file.
Names are strict (an id or an alias, never a prefix): :func:`require` for a user's name,
:func:`lookup` for a recorded one. Details: docs/architecture.md, "Tokens and windows"."""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path
from typing import Any

from ..errors import CtxtoolError, Failure


@dataclass(frozen=True, slots=True)
class Prices:
    """USD per 1M tokens: input, output, prompt-cache write and prompt-cache read."""

    input: float
    output: float
    cache_write: float
    cache_read: float

    def cost(self, input: int, output: int, cache_write: int = 0, cache_read: int = 0) -> float:
        """The cost in USD of these token counts."""
        return (
            input * self.input + output * self.output + cache_write * self.cache_write + cache_read * self.cache_read
        ) / 1_000_000

    def to_json(self) -> dict[str, float]:
        return {
            "input_price": self.input,
            "output_price": self.output,
            "cache_write_price": self.cache_write,
            "cache_read_price": self.cache_read,
        }


@dataclass(frozen=True, slots=True)
class DatedPrices:
    """Prices that applied from ``start`` (included) until ``end`` (excluded; None: open)."""

    start: date
    end: date | None
    prices: Prices

    def applies(self, day: date) -> bool:
        return self.start <= day and (self.end is None or day < self.end)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"from": self.start.isoformat()}
        if self.end is not None:
            d["until"] = self.end.isoformat()
        return {**d, **self.prices.to_json()}


@dataclass(frozen=True, slots=True)
class ModelInfo:
    name: str
    provider: str
    context_window: int
    max_output: int
    input_price: float  # USD per 1M input tokens
    output_price: float  # USD per 1M output tokens
    encoding: str
    aliases: tuple[str, ...] = ()
    cache_write_price: float | None = None  # USD per 1M prompt-cache write tokens (None: input price)
    cache_read_price: float | None = None  # USD per 1M prompt-cache read tokens (None: input price)
    dated_prices: tuple[DatedPrices, ...] = ()  # prices that applied over a span of dates
    source: str = "ctxtool"  # where the window and prices came from: litellm | ctxtool | user

    @property
    def list_prices(self) -> Prices:
        """The current list prices (a missing cache price is the input price)."""
        return _prices(self.input_price, self.output_price, self.cache_write_price, self.cache_read_price)

    def prices(self, day: date | None = None) -> Prices:
        """The prices that applied on ``day``: the first dated entry spanning it, else the
        list prices (also when ``day`` is None)."""
        if day is not None:
            for dp in self.dated_prices:
                if dp.applies(day):
                    return dp.prices
        return self.list_prices

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": self.name,
            "provider": self.provider,
            "context_window": self.context_window,
            "max_output": self.max_output,
            "input_price": self.input_price,
            "output_price": self.output_price,
            "cache_write_price": self.list_prices.cache_write,
            "cache_read_price": self.list_prices.cache_read,
            "encoding": self.encoding,
            "aliases": list(self.aliases),
            "source": self.source,
        }
        if self.dated_prices:
            d["dated_prices"] = [dp.to_json() for dp in self.dated_prices]
        return d


def _prices(inp: float, out: float, write: float | None, read: float | None) -> Prices:
    return Prices(inp, out, inp if write is None else write, inp if read is None else read)


def _opt_price(v: Any) -> float | None:
    return None if v is None else float(v)


def _date(v: Any, name: str, where: str) -> date:
    try:
        return date.fromisoformat(str(v))
    except ValueError as e:
        raise CtxtoolError(
            f"model registry: {name}: dated_prices {where} {v!r} is not a YYYY-MM-DD date", kind=Failure.INPUT
        ) from e


def _dated(name: str, spec: dict[str, Any]) -> tuple[DatedPrices, ...]:
    """A model's ``dated_prices``: each entry's missing input/output price is the list
    price; a missing cache price is the entry's input price."""
    out = []
    for d in spec.get("dated_prices") or ():
        if not isinstance(d, dict) or "from" not in d:
            raise CtxtoolError(f"model registry: {name}: each dated_prices entry needs a \"from\" date", kind=Failure.INPUT)
        inp = float(d.get("input_price", spec.get("input_price", 0.0)))
        prices = _prices(inp, float(d.get("output_price", spec.get("output_price", 0.0))),
                         _opt_price(d.get("cache_write_price")), _opt_price(d.get("cache_read_price")))
        end = _date(d["until"], name, "until") if d.get("until") is not None else None
        out.append(DatedPrices(_date(d["from"], name, "from"), end, prices))
    return tuple(sorted(out, key=lambda dp: dp.start))


def user_models_file() -> Path:
    env = os.environ.get("CTXTOOL_MODELS")
    if env:
        return Path(env).expanduser()
    # lazy: start-up (loaded only when this runs: ..io.paths)
    from ..io.paths import config_dir

    return config_dir() / "models.json"


#: the fields litellm gives; where one of them comes from in an entry is its ``source``
LITELLM_FIELDS = ("provider", "context_window", "max_output", "input_price", "output_price", "cache_write_price",
                  "cache_read_price")


def _data(name: str) -> dict[str, Any]:
    # The registry is read on the first lookup, not at import; through the package's loader
    # (pkgutil), as importlib.resources would read it but without its ~2 ms of imports.
    import pkgutil

    raw = pkgutil.get_data("ctxtool", f"data/{name}")
    if raw is None:  # pragma: no cover - a loader that cannot read data: the registry is missing
        raise FileNotFoundError(f"ctxtool/data/{name}")
    return dict(json.loads(raw.decode("utf-8")))


def litellm_source() -> dict[str, str]:
    """Where the vendored windows and prices came from (litellm's version, its licence, the
    day they were refreshed, how to refresh them)."""
    return dict(_data("litellm_models.json").get("_source") or {})


def _over(old: dict[str, Any] | None, spec: dict[str, Any], layer: str) -> dict[str, Any]:
    """``spec``'s fields over ``old``'s; the source is ``layer`` when it sets a window or a price."""
    if old is None or any(k in spec for k in LITELLM_FIELDS):
        return {**(old or {}), **spec, "source": layer}
    return {**old, **spec, "source": old.get("source", layer)}


class _Registry:
    """One user file's registry: every entry's fields (litellm's, ctxtool's, the user's over
    them), each made a :class:`ModelInfo` when first asked (a lookup asks for one of ~640).
    The entries the user's file sets are made as it is read: a bad one is an error then."""

    def __init__(self, specs: dict[str, dict[str, Any]], path: str | None) -> None:
        self.specs = specs
        self.path = path  # the user's file, when there is one (named in errors)
        self._made: dict[str, ModelInfo] = {}
        self._all: dict[str, ModelInfo] | None = None

    def entry(self, name: str) -> ModelInfo:
        info = self._made.get(name)
        if info is None:
            try:
                info = _entry(name, self.specs[name])
            except (TypeError, ValueError) as e:
                raise CtxtoolError(f"model registry: {name}: {e}", path=self.path, kind=Failure.INPUT) from e
            self._made[name] = info
        return info

    def all(self) -> dict[str, ModelInfo]:
        if self._all is None:
            self._all = {name: self.entry(name) for name in self.specs}
        return self._all


@functools.lru_cache(maxsize=4)
def _load(user_file: str) -> _Registry:
    litellm: dict[str, dict[str, Any]] = {k: {**v, "source": "litellm"}
                                          for k, v in _data("litellm_models.json")["models"].items()}
    entries: dict[str, dict[str, Any]] = {}
    for name, spec in _data("models.json")["models"].items():
        names = [name, *(spec.get("aliases") or ())]
        base = next((litellm[n] for n in names if n in litellm), {})
        for n in names:  # a dated snapshot litellm lists apart is an alias of this entry
            litellm.pop(n, None)
        entries[name] = _over(base or None, spec, "ctxtool")
    entries = {**litellm, **entries}
    p = Path(user_file)
    set_by_user: set[str] = set()
    if p.is_file():
        try:
            user = json.loads(p.read_text("utf-8"))
        except (OSError, ValueError) as e:
            raise CtxtoolError(f"cannot read model registry: {e}", path=str(p), kind=Failure.INPUT) from e
        for name, info in (user.get("models", user) or {}).items():
            if isinstance(info, dict):
                entries[name] = _over(entries.get(name), info, "user")
                set_by_user.add(name)
    reg = _Registry(entries, str(p) if p.is_file() else None)
    for name in entries:  # in the registry's order, as every entry was made before
        if name in set_by_user:
            reg.entry(name)
    return reg


def _default_encoding(name: str) -> str:
    """OpenAI's older models (GPT-4, GPT-3.5) count with cl100k_base; the others with o200k_base
    (the closest public tokenizer for other vendors' models too)."""
    n = name.rsplit("/", 1)[-1]
    old = n.startswith(("gpt-3.5", "gpt-4")) and not n.startswith(("gpt-4o", "gpt-4.1", "gpt-4.5"))
    return "cl100k_base" if old else "o200k_base"


def _entry(name: str, spec: dict[str, Any]) -> ModelInfo:
    return ModelInfo(
        name=name,
        provider=str(spec.get("provider", "")),
        context_window=int(spec.get("context_window", 0)),
        max_output=int(spec.get("max_output", 0)),
        input_price=float(spec.get("input_price", 0.0)),
        output_price=float(spec.get("output_price", 0.0)),
        encoding=str(spec.get("encoding") or _default_encoding(name)),
        aliases=_aliases(spec),
        cache_write_price=_opt_price(spec.get("cache_write_price")),
        cache_read_price=_opt_price(spec.get("cache_read_price")),
        dated_prices=_dated(name, spec),
        source=str(spec.get("source", "ctxtool")),
    )


def _aliases(spec: dict[str, Any]) -> tuple[str, ...]:
    """An entry's other names (:attr:`ModelInfo.aliases`)."""
    return tuple(str(a) for a in spec.get("aliases") or () if isinstance(a, str))


@functools.lru_cache(maxsize=4)
def _names(user_file: str) -> dict[str, str]:
    """Every accepted name (ids and aliases) -> the entry's id; an id wins over an alias."""
    specs = _load(user_file).specs
    out: dict[str, str] = {}
    for name, spec in specs.items():
        for a in _aliases(spec):
            out.setdefault(a, name)
    for name in specs:
        out[name] = name
    return out


def models() -> dict[str, ModelInfo]:
    return _load(str(user_models_file())).all()


#: the suffix Claude Code puts on a model it runs with the 1M-token window
#: (``claude-sonnet-4-5[1m]``, ``opus[1m]``: "Extended context with [1m]" in its model configuration docs)
ONE_M_SUFFIX = "[1m]"
ONE_M_WINDOW = 1_000_000


def _resolve(name: str) -> ModelInfo | None:
    f = str(user_models_file())
    names = _names(f)
    n = name.strip()
    if n.lower().endswith(ONE_M_SUFFIX) and n not in names:
        base = _resolve(n[: -len(ONE_M_SUFFIX)])  # the model's entry, with the window the suffix asks for
        return replace(base, context_window=ONE_M_WINDOW) if base is not None else None
    key = names.get(n)
    if key is None and "/" in n:
        key = names.get(n.rsplit("/", 1)[-1])  # provider/model, as routers write it
    return _load(f).entry(key) if key is not None else None


def lookup(name: str | None) -> ModelInfo | None:
    """The entry whose id or alias is ``name`` (after an optional ``provider/``); else None."""
    if not name:
        return None
    return _resolve(name)


def closest(name: str, n: int = 3) -> list[str]:
    """The registered names (ids and aliases) closest to ``name``."""
    import difflib

    base = name.strip().rsplit("/", 1)[-1]
    return difflib.get_close_matches(base, list(_names(str(user_models_file()))), n=n, cutoff=0.6)


def require(name: str) -> ModelInfo:
    """:func:`lookup` for a name the user gave: an unknown name is a usage error that
    suggests the closest registered names."""
    info = lookup(name)
    if info is None:
        near = closest(name)
        hint = f"; did you mean {', '.join(near)}?" if near else ""
        raise CtxtoolError(
            f"unknown model {name!r}{hint} (`ctxtool models` lists them; add one to {user_models_file()})",
            kind=Failure.USAGE,
        )
    return info


def unknown(names: Any) -> list[str]:
    """The names among ``names`` (model names recorded in transcripts) that no entry answers
    to, sorted; Claude Code's ``<synthetic>`` stand-in and empty names are not models."""
    return sorted({n for n in names if n and not str(n).startswith("<") and lookup(str(n)) is None})


def missing_hint(name: str) -> str:
    """What to say of a model the registry does not know: which registry, and how to add it."""
    src = litellm_source().get("from", "litellm").split(" (")[0]
    example = json.dumps({"models": {name: {"context_window": 200000, "input_price": 3.0, "output_price": 15.0}}})
    return (f"model {name!r} is not in the model registry ({src} and ctxtool's own entries), so its window and "
            f"prices are unknown; add it to {user_models_file()} (or the file $CTXTOOL_MODELS names), e.g. "
            f"{example} (prices in USD per 1M tokens), or give --context-window")
