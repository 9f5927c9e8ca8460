"""The trigger policy registry: when should a context be compacted (each system's rule).

``check``, ``compact``, ``replay``, ``stats`` and the agent-loop transform all ask this
registry, so every setting that configures a policy is honoured wherever it applies.
A new policy is one class (:class:`Policy`: its name, origin, config keys and
:meth:`~Policy.limits`) plus one line here, or a :func:`register` call::

    class Half(Policy):
        name, origin, help = "half", "-", "tokens >= window / 2"
        def limits(self, window, s):
            return Limits((Threshold("half", "tokens", window // 2, "50% of window", "-"),) if window else (),
                          "tokens >= window / 2", NO_LIMIT if not window else OK)

    policies.register(Half)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..config import Setting, add_settings
from ..errors import CtxtoolError, Failure
from .base import Measure, Policy, Threshold, Verdict
from .builtin import Chars, EffectiveLimit, HardStop, Ratio, Reserve

if TYPE_CHECKING:
    from .settings import PolicySettings


_REGISTRY: dict[str, Policy] = {}


def register(cls: type[Policy]) -> type[Policy]:
    """Add a policy class (usable as a decorator); its name must be new."""
    if cls.name in _REGISTRY:
        raise ValueError(f"policy {cls.name!r} is already registered")
    _REGISTRY[cls.name] = cls()
    return cls


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


for _cls in (EffectiveLimit, Reserve, Ratio, HardStop, Chars):  # the registry: one line per policy
    register(_cls)

DEFAULT = "effective-limit"

#: former names, still accepted (configs and scripts written before the rename); never listed
ALIASES = {"seed000": "effective-limit", "seed004": "hard-stop"}


def canonical(name: str) -> str:
    """A policy's registered name for ``name`` (a former name maps to the new one)."""
    return ALIASES.get(name, name)


def names() -> list[str]:
    return list(_REGISTRY)


def all() -> list[Policy]:  # noqa: A001 - the registry's own name for "every policy"
    return list(_REGISTRY.values())


def get(name: str) -> Policy:
    p = _REGISTRY.get(canonical(name))
    if p is None:
        raise CtxtoolError(f"unknown policy {name!r}; choose one of: {', '.join(_REGISTRY)}", kind=Failure.USAGE)
    return p


def all_keys() -> list[str]:
    """Every config key some registered policy reads, in registry order."""
    seen: dict[str, None] = {}
    for p in _REGISTRY.values():
        for k in (*p.keys, *(s.key for s in p.settings)):
            seen.setdefault(k, None)
    return list(seen)


def extra_settings() -> Iterator[Setting]:
    """Settings declared by registered policies (new config keys with their defaults)."""
    for p in _REGISTRY.values():
        yield from p.settings


add_settings(extra_settings)  # the config table holds the keys registered policies declare


def evaluate(m: Measure, s: PolicySettings) -> list[Verdict]:
    """Every registered policy's verdict on one measured context."""
    return [p.evaluate(m, s) for p in _REGISTRY.values()]


def thresholds(window: int | None, s: PolicySettings) -> list[Threshold]:
    """Every registered policy's thresholds for a window (what replay and charts draw)."""
    return [th for p in _REGISTRY.values() for th in p.limits(window, s).thresholds]
