"""The trigger policy registry: when should a context be compacted (each system's rule).
``check``, ``compact``, ``replay``, ``stats`` and the agent-loop transform all ask it, so every
policy setting is honoured wherever it applies. A new policy is one :class:`Policy` subclass (its
name, origin, config keys and :meth:`~Policy.limits`) and one :func:`register` line
(``tests/test_triggers.py`` shows one)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..config import Setting, add_settings
from ..registry import Registry
from .base import Measure, Policy, Threshold, Verdict
from .builtin import Chars, EffectiveLimit, HardStop, Ratio, Reserve

if TYPE_CHECKING:
    from .settings import PolicySettings

#: the policies by name; former names (configs and scripts written before the rename) are accepted, never listed
POLICIES: Registry[Policy] = Registry("policy", unique=True)
#: add a policy class (usable as a decorator); its name must be new
register = POLICIES.register_instance_of

POLICIES.register(EffectiveLimit(), aliases=("seed000",))  # the registry: one line per policy
POLICIES.register(Reserve())
POLICIES.register(Ratio())
POLICIES.register(HardStop(), aliases=("seed004",))
POLICIES.register(Chars())

DEFAULT = "effective-limit"


def all_keys() -> list[str]:
    """Every config key some registered policy reads, in registry order."""
    seen: dict[str, None] = {}
    for p in POLICIES.values():
        for k in (*p.keys, *(s.key for s in p.settings)):
            seen.setdefault(k, None)
    return list(seen)


def extra_settings() -> Iterator[Setting]:
    """Settings declared by registered policies (new config keys with their defaults)."""
    for p in POLICIES.values():
        yield from p.settings


add_settings(extra_settings)  # the config table holds the keys registered policies declare


def evaluate(m: Measure, s: PolicySettings) -> list[Verdict]:
    """Every registered policy's verdict on one measured context."""
    return [p.evaluate(m, s) for p in POLICIES.values()]


def thresholds(window: int | None, s: PolicySettings) -> list[Threshold]:
    """Every registered policy's thresholds for a window (what replay and charts draw)."""
    return [th for p in POLICIES.values() for th in p.limits(window, s).thresholds]
