"""One registry type behind every kind of extension (ctxtool.registry.Registry): registering,
getting with a did-you-mean error, former names, lazy entries; and no module of the package
keeps a registry of its own kind."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys
from typing import Any, ClassVar

import pytest

import ctxtool
from ctxtool.cli.exits import ExitCode
from ctxtool.errors import CtxtoolError, Failure
from ctxtool.registry import LazyEntry, Registry


class Shape:
    name: ClassVar[str] = ""


class Square(Shape):
    name = "square"


class Circle(Shape):
    name = "circle"


def test_register_get_names_unregister() -> None:
    reg: Registry[type[Shape]] = Registry("shape")
    assert reg.register(Square) is Square  # a class decorator: the class comes back
    reg.register(Circle, "round", aliases=("disc",))
    assert reg.names() == ("square", "round") and list(reg) == ["square", "round"] and len(reg) == 2
    assert reg.get("square") is Square and reg.get("disc") is Circle
    assert "round" in reg and "disc" in reg and "triangle" not in reg and 3 not in reg
    assert reg.items() == [("square", Square), ("round", Circle)] and reg.values() == [Square, Circle]
    reg.unregister("square")
    reg.unregister("never-there")  # no error
    assert reg.names() == ("round",) and "square" not in reg


def test_an_unknown_name_is_a_usage_error_with_the_closest_names_and_the_choices() -> None:
    reg: Registry[int] = Registry("colour")
    for i, name in enumerate(("red", "green", "blue")):
        reg.register(i, name)
    reg.aliases["verde"] = "green"
    with pytest.raises(CtxtoolError) as e:
        reg.get("gren")
    assert e.value.kind == Failure.USAGE
    assert str(e.value) == "unknown colour 'gren' (did you mean 'green'?); choose one of: red, green, blue"
    with pytest.raises(CtxtoolError) as e:
        reg.get("verd")  # close to a former name: the name it stands for is suggested, never the former one
    assert str(e.value) == "unknown colour 'verd' (did you mean 'green'?); choose one of: red, green, blue"
    with pytest.raises(CtxtoolError) as e:
        reg.get("purple")  # nothing close: the choices only (the message every registry gave before)
    assert str(e.value) == "unknown colour 'purple'; choose one of: red, green, blue"


def test_fold_and_aliases() -> None:
    reg: Registry[str] = Registry("format", fold=lambda n: n.lower().replace("_", "-"))
    reg.register("cc", "claude-code", aliases=("claude",))
    assert reg.get("Claude_Code") == "cc" and reg.get("CLAUDE") == "cc"
    assert reg.key("Claude_Code") == "claude-code" and reg.names() == ("claude-code",)


def test_registering_again_replaces_in_place_unless_names_are_unique() -> None:
    reg: Registry[int] = Registry("number")
    reg.register(1, "one")
    reg.register(2, "two")
    reg.register(11, "one")
    assert reg.items() == [("one", 11), ("two", 2)]
    unique: Registry[Shape] = Registry("shape", unique=True)
    assert unique.register_instance_of(Square) is Square and isinstance(unique.get("square"), Square)
    with pytest.raises(ValueError, match="shape 'square' is already registered"):
        unique.register_instance_of(Square)
    with pytest.raises(ValueError, match="a shape needs a name"):
        unique.register_instance_of(Shape)


def test_a_lazy_entry_is_imported_when_first_asked_for() -> None:
    code = (
        "import sys\n"
        "from ctxtool.registry import LazyEntry, Registry\n"
        "reg = Registry('codec')\n"
        "reg.register(LazyEntry('ctxtool.formats.pi:FORMAT'), 'pi')\n"
        "assert 'ctxtool.formats.pi' not in sys.modules and reg.names() == ('pi',)\n"
        "assert isinstance(reg.entry('pi'), LazyEntry)\n"
        "assert reg.get('pi').name == 'pi' and 'ctxtool.formats.pi' in sys.modules\n"
        "assert isinstance(reg.entry('pi'), LazyEntry)  # the entry stays as registered\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    assert LazyEntry("ctxtool.cli.exits:ExitCode").load() is ExitCode


# -- every registry of the package is one ----------------------------------------------------------------
def _modules() -> list[Any]:
    out = []
    for m in pkgutil.walk_packages(ctxtool.__path__, "ctxtool."):
        if m.name.endswith("__main__"):
            continue
        try:
            out.append(importlib.import_module(m.name))
        except ImportError:  # an optional extra not installed (ray ...)
            continue
    return out


def _looks_like_a_registry(d: dict[Any, Any]) -> bool:
    """A table of name -> classes, functions, or objects named by their key: what a registry of
    extensions was before there was one type of it."""
    if len(d) < 2 or not all(isinstance(k, str) for k in d):
        return False
    values = list(d.values())
    return (all(inspect.isclass(v) for v in values) or all(inspect.isfunction(v) for v in values)
            or all(getattr(v, "name", None) == k for k, v in d.items()))


#: the registries, where each is defined (a new kind of extension adds a line)
REGISTRIES = {
    "ctxtool.formats": "FORMATS",
    "ctxtool.summarizers": "SUMMARIZERS",
    "ctxtool.compaction.layouts": "LAYOUTS",
    "ctxtool.tool_outputs.algorithms": ("MODES", "PRESETS"),
    "ctxtool.export.base": "RENDERERS",
    "ctxtool.score.kinds": "PROBE_KINDS",
    "ctxtool.policies": "POLICIES",
    "ctxtool.run.engines": "ENGINES",
    "ctxtool.tokens.backends": "EXACT_BACKENDS",
    "ctxtool.tokens.count": "ESTIMATORS",
    "ctxtool.usage.report": "GROUPINGS",
    "ctxtool.usage.events": "KEYS",
}


def test_every_registry_of_the_package_is_a_registry() -> None:
    found: dict[int, str] = {}
    tables = []
    for mod in _modules():
        for name, value in vars(mod).items():
            if isinstance(value, Registry):
                found.setdefault(id(value), f"{mod.__name__}.{name}")
            elif isinstance(value, dict) and _looks_like_a_registry(value):
                tables.append(f"{mod.__name__}.{name}")
    assert tables == [], "a registry of its own kind: make it a ctxtool.registry.Registry"
    listed = {id(getattr(importlib.import_module(m), n)) for m, names in REGISTRIES.items()
              for n in ((names,) if isinstance(names, str) else names)}
    assert sorted(found[i] for i in set(found) - listed) == [], "a registry missing from REGISTRIES"
    assert listed <= set(found) and len(listed) == 13


def test_the_cli_offers_what_the_registries_hold() -> None:
    from typer.main import get_command

    from ctxtool.cli import app
    from ctxtool.formats import FORMATS
    from ctxtool.policies import POLICIES
    from ctxtool.run.engines import ENGINES
    from ctxtool.tokens.count import ESTIMATORS
    from ctxtool.tool_outputs.algorithms import MODES, PRESETS
    from ctxtool.usage.report import GROUPINGS

    group = get_command(app)
    ctx = group.make_context("ctxtool", ["--help"], resilient_parsing=True)

    def choices(command: str, option: str) -> tuple[str, ...]:
        cmd = group.get_command(ctx, command)
        param = next(p for p in cmd.params if option in p.opts)
        return tuple(param.type.choices)

    assert choices("stats", "--format") == FORMATS.names() and choices("convert", "--to") == FORMATS.names()
    assert choices("stats", "--tokenizer") == ESTIMATORS.names()
    assert choices("truncate", "--engine") == ENGINES.names()
    assert choices("truncate", "--mode") == MODES.names() and choices("truncate", "--preset") == PRESETS.names()
    assert choices("check", "--policy") == POLICIES.names()
    assert choices("usage", "--by") == GROUPINGS.names()
    ENGINES.register(LazyEntry("ctxtool.run.engines.local:LocalEngine"), "elsewhere")
    try:
        assert choices("truncate", "--engine") == ("local", "ray", "elsewhere")  # asked when parsed, not at import
    finally:
        ENGINES.unregister("elsewhere")
