"""Token ratios per model family, shipped in ``ctxtool/data/token_ratios.json`` and learned
from the corpus (``make token-ratios``): what ``--tokenizer calibrated`` uses where a file
records no usage."""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import cache
from importlib import resources
from typing import Any

from ..model import Transcript
from .features import context_rows, turn_samples
from .fit import Calibration, ErrorStats, after_compaction, fit, heuristic_calibration

GENERIC = "generic"  # the family used when the model is unknown
FAMILY_PREFIXES = {"anthropic": ("claude",), "openai": ("gpt", "o1", "o3", "o4", "codex"), "google": ("gemini",)}
RATIOS_COMMENT = (
    "Token ratios per model family, learned from the real transcripts of the corpus by `make token-ratios` "
    "(ctxtool.calibration.families.learn_families): input tokens = overhead + tokens_per_char[kind] x characters + "
    "tokens_per_image x images. error: the relative error of these ratios measured on each file with ratios "
    "learned without it. Used by --tokenizer calibrated where a file records no usage. after_compaction: the error "
    "of a file's own calibration on the first turn after a compaction (no usage recorded since), fitted on the turns "
    "before it: the error bar of that estimate."
)


RATIOS_FILE = "data/token_ratios.json"


@cache
def shipped_ratios() -> dict[str, Any]:
    """The shipped family ratios (none before ``make token-ratios`` first wrote them)."""
    try:
        data: dict[str, Any] = json.loads(resources.files("ctxtool").joinpath(RATIOS_FILE).read_text("utf-8"))
    except FileNotFoundError:
        return {"families": {}}
    return data



def family_of(model: str | None) -> str:
    """The family whose ratios apply to a model: its registry entry's provider, else the
    one its name's prefix names (:data:`FAMILY_PREFIXES`), else ``generic``."""
    if not model:
        return GENERIC
    # lazy: start-up (loaded only when this runs: ..tokens.models)
    from ..tokens.models import lookup

    info = lookup(model)
    prov = getattr(info, "provider", None) if info is not None else None
    if isinstance(prov, str) and prov in FAMILY_PREFIXES:
        return prov
    name = model.lower().rsplit("/", 1)[-1]
    return next((fam for fam, ps in FAMILY_PREFIXES.items() if name.startswith(ps)), GENERIC)


def family_keys(model: str | None, fmt: str | None = None) -> list[str]:
    """The families a transcript's ratios may come from, most specific first: its model
    family as the agent (the format) uses it (``anthropic@claude-code``: the agent's system
    prompt and tool schemas are most of the overhead), its model family, ``generic``."""
    fam = family_of(model)
    keys = [f"{fam}@{fmt}"] if fmt and fam != GENERIC else []
    return [*keys, fam, GENERIC] if fam != GENERIC else [GENERIC]


def pick(families: dict[str, Any], model: str | None, fmt: str | None = None) -> tuple[str, dict[str, Any]] | None:
    """The most specific of :func:`family_keys` with ratios whose error was measured (on
    files left out: a family learned from one file has none), else ``generic``."""
    keys = family_keys(model, fmt)
    for k in keys:
        spec = families.get(k)
        if spec is not None and (spec.get("error") or {}).get("turns"):
            return k, spec
    return (GENERIC, families[GENERIC]) if GENERIC in families else None


def family_calibration(model: str | None, fmt: str | None = None) -> Calibration:
    """The shipped calibration of the model's family (see :func:`pick`; the heuristic when
    nothing is shipped)."""
    got = pick(shipped_ratios()["families"], model, fmt)
    if got is None:
        return heuristic_calibration()
    fam, spec = got
    return Calibration.from_spec(spec, error=spec.get("error", {}).get("p90"), source=f"family:{fam}",
                                 trained_on=int(spec.get("turns", 0)))


def learn_families(transcripts: Iterable[tuple[str, Transcript]]) -> dict[str, Any]:
    """Family ratios learned from transcripts that record usage (``(name, transcript)``
    pairs), in the shape of ``ctxtool/data/token_ratios.json``: each file's calibration is
    fitted on its own turns (from the heuristic), and a family's ratios are the median of
    its files' (one odd file, such as a session whose text was redacted, does not move
    them). The error is measured file by file with the median of the other files' ratios
    (leave one file out; a family of one file has none). ``generic`` pools every family."""
    from statistics import median

    # lazy: start-up (loaded only when this runs: ..tokens.bpe, ..tokens.context, ..tokens.count)
    from ..tokens.bpe import TOKENIZERS
    from ..tokens.context import last_model
    from ..tokens.count import count_messages, get_tokenizer

    start = heuristic_calibration()
    data: dict[str, list[tuple[str, list[list[float]], list[float], list[float]]]] = {}
    raws: dict[str, list[tuple[dict[str, list[int]], list[float]]]] = {}
    firsts: dict[str, tuple[list[float], list[float]]] = {}
    for name, t in transcripts:
        samples = turn_samples(t)
        if not samples:
            continue
        rows = context_rows(t, samples)
        ys = [float(s.recorded) for s in samples]
        coef = fit(rows, ys, start).coefficients()
        raw = {}
        for tname in TOKENIZERS:
            tok = get_tokenizer(tname)
            counts = count_messages(t.messages, tok)
            raw[tname] = [(tok.count(s.summary) if s.summary else 0) + sum(counts[i] for i in s.context) for s in samples]
        first = after_compaction(samples, rows, start)
        for fam in family_keys(last_model(t), t.format):
            e, r = firsts.setdefault(fam, ([], []))
            e += first[0]
            r += first[1]
            data.setdefault(fam, []).append((name, rows, ys, coef))
            raws.setdefault(fam, []).append((raw, ys))
    out: dict[str, Any] = {}
    for fam, files in sorted(data.items()):
        c = Calibration.from_coefficients([median(col) for col in zip(*(f[3] for f in files), strict=True)])
        est: list[float] = []
        rec: list[float] = []
        for k, (_, rows, ys, _) in enumerate(files):
            others = [f[3] for j, f in enumerate(files) if j != k]
            if others:
                held = Calibration.from_coefficients([median(col) for col in zip(*others, strict=True)])
                est += [held.predict(r) for r in rows]
                rec += ys
        out[fam] = {
            **c.spec(),
            "turns": sum(len(f[2]) for f in files),
            "files": sorted(f[0] for f in files),
            "error": {**ErrorStats.of(est, rec).to_json(), "measured": "leave one file out"},
            "after_compaction": {**ErrorStats.of(*firsts[fam]).to_json(),
                                 "measured": "the first turn after each compaction, fitted on the file's turns before it"},
            "tokenizers": {n: ErrorStats.of([e for r, _ in raws[fam] for e in r[n]],
                                            [y for _, ys in raws[fam] for y in ys]).to_json() for n in TOKENIZERS},
        }
    return {"_comment": RATIOS_COMMENT, "families": out}


#: model-name prefixes of a family, for a model the registry does not list
