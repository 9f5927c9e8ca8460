"""CLI choices come from the registries: every option whose values name the entries of a
registry (ctxtool.registry.Registry) takes them through one helper
(ctxtool.cli.common.registry_option), so that what it accepts, what its help lists and the
did-you-mean of its error are the registry's. Read through the real command
(``python -m ctxtool``), and from the app, so that an option added later is held too."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

from ctxtool.cli.common import RegistryChoice

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = str(ROOT / "samples" / "openai_dataset.jsonl")

#: (command, option, where the registry is defined, names the option does not take)
OPTIONS: list[tuple[str, str, str, tuple[str, ...]]] = [
    ("stats", "--format", "ctxtool.formats:FORMATS", ()),
    ("stats", "--tokenizer", "ctxtool.tokens.count:ESTIMATORS", ()),
    ("stats", "--engine", "ctxtool.run.engines:ENGINES", ()),
    ("convert", "--to", "ctxtool.formats:FORMATS", ()),
    ("truncate", "--to", "ctxtool.formats:FORMATS", ()),
    ("truncate", "--preset", "ctxtool.tool_outputs.algorithms:PRESETS", ()),
    ("truncate", "--mode", "ctxtool.tool_outputs.algorithms:MODES", ()),
    ("window", "--engine", "ctxtool.run.engines:ENGINES", ()),
    ("check", "--policy", "ctxtool.policies:POLICIES", ()),
    ("compact", "--policy", "ctxtool.policies:POLICIES", ()),
    ("compact", "--layout", "ctxtool.compaction.layouts:LAYOUTS", ()),
    ("compact", "--summarizer", "ctxtool.summarizers:SUMMARIZERS", ()),
    ("score", "--after-format", "ctxtool.formats:FORMATS", ()),
    ("score", "--judge", "ctxtool.summarizers:SUMMARIZERS", ("heuristic",)),  # a judge answers questions
    ("usage", "--by", "ctxtool.usage.report:GROUPINGS", ()),
    ("export", "--to", "ctxtool.export:RENDERERS", ()),
]


def registry(target: str):
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def ctxtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ctxtool", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}, cwd=ROOT)


def help_choices(command: str) -> dict[str, list[str]]:
    """option -> the values its help lists (``--to <a|b|c>``), from ``ctxtool COMMAND --help``."""
    p = ctxtool(command, "--help")
    assert p.returncode == 0, p.stderr
    return {m[1]: m[2].split("|") for m in re.finditer(r"(?m)^\s+(?:-\w, )?(--[\w-]+) <([^>]*)>", p.stdout)}


@pytest.mark.parametrize("command", sorted({c for c, *_ in OPTIONS}))
def test_help_lists_the_registry_names(command: str) -> None:
    listed = help_choices(command)
    for cmd, option, target, exclude in OPTIONS:
        if cmd == command:
            names = [n for n in registry(target).names() if n not in exclude]
            assert listed.get(option) == names, (command, option)


@pytest.mark.parametrize(("command", "option", "target", "exclude"), OPTIONS, ids=[f"{c} {o}" for c, o, *_ in OPTIONS])
def test_a_value_the_registry_does_not_know_is_its_usage_error(command: str, option: str, target: str,
                                                              exclude: tuple[str, ...]) -> None:
    reg = registry(target)
    names = [n for n in reg.names() if n not in exclude]
    typo = names[0][:-1] + "x"  # one letter off the first name: the error suggests it
    p = ctxtool(command, option, typo, SAMPLE, *([SAMPLE] if command == "score" else []))
    assert p.returncode == 2 and "Traceback" not in p.stderr
    expected = reg.unknown(typo, among=names, kind="judge" if exclude else None).message
    assert f"Invalid value for '{option}'" in p.stderr and expected in p.stderr
    assert f"did you mean {names[0]!r}" in p.stderr
    for name in exclude:  # registered, but not a value of this option
        p = ctxtool(command, option, name, SAMPLE, SAMPLE)
        assert p.returncode == 2 and f"unknown judge {name!r}" in p.stderr


def test_the_cli_accepts_what_the_registry_accepts() -> None:
    """A spelling the registry folds or a former name is taken as the registered name."""
    formats = registry("ctxtool.formats:FORMATS")
    assert "Claude_Code" in formats
    p = ctxtool("stats", "--json", "--format", "OpenAI", SAMPLE)
    assert p.returncode == 0, p.stderr
    presets = registry("ctxtool.tool_outputs.algorithms:PRESETS")
    for alias in presets.aliases:
        choice = RegistryChoice(presets)
        assert choice.convert(alias, None, None) == presets.key(alias)


def _params() -> dict[str, list[click.Parameter]]:
    from ctxtool.cli.docgen import leaves

    return {path: list(cmd.params) for path, cmd in leaves().items()}


def test_every_option_naming_registry_entries_takes_them_from_the_registry() -> None:
    """Each option listed above is a RegistryChoice over that registry, and no other option of
    any command offers a registry's names through a hand-written choice."""
    params = _params()
    seen = set()
    for command, option, target, exclude in OPTIONS:
        (p,) = [p for p in params[command] if option in getattr(p, "opts", ())]
        assert isinstance(p.type, RegistryChoice), (command, option)
        assert p.type.registry() is registry(target) and p.type.exclude == frozenset(exclude)
    registries = {t: set(registry(t).names()) for _c, _o, t, _e in OPTIONS}
    for path, ps in params.items():
        for p in ps:
            if isinstance(p.type, RegistryChoice):
                seen.add((path, p.opts[0]))
            elif isinstance(p.type, click.Choice):  # a closed set of its own (window --strategy)
                assert set(p.type.choices) not in registries.values(), (path, p.opts)
            elif any(o in ("--format", "--to", "--tokenizer", "--engine", "--policy") for o in getattr(p, "opts", ())):
                raise AssertionError(f"{path} {p.opts}: names a registry entry without registry_option")
    listed = {(c, o) for c, o, *_ in OPTIONS}
    long = {(path, next(o for o in p.opts if o.startswith("--")))
            for path, ps in params.items() for p in ps if isinstance(p.type, RegistryChoice)}
    assert listed <= long
    assert seen  # the app was read
