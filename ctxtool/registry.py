"""One registry type behind every kind of extension (formats, summarizers, layouts, policies ...):
names in registration order, former names, entries loaded on first use, and one error for an
unknown name, with the closest names and the choices."""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Generic, TypeVar, cast

from .errors import CtxtoolError, Failure

T = TypeVar("T")
E = TypeVar("E")


class LazyEntry(Generic[T]):
    """An entry whose module is imported when it is first asked for (start-up stays cheap):
    ``"package.module:attribute"``. It is loaded each time it is asked for (the import is
    Python's, once), so the entry itself stays in the registry for those that inspect it."""

    __slots__ = ("target",)

    def __init__(self, target: str) -> None:
        self.target = target

    def load(self) -> T:
        module, _, attribute = self.target.partition(":")
        return cast(T, getattr(importlib.import_module(module), attribute))


class Registry(Generic[T]):
    """Named entries of one ``kind`` ("format", "layout" ...), in registration order.

    ``fold`` maps a name as typed to the registered spelling (case, ``_`` for ``-``);
    ``aliases`` are former names, accepted and never listed; ``unique``: registering a name
    twice is an error (otherwise the later entry replaces the earlier one in its place)."""

    def __init__(self, kind: str, *, fold: Callable[[str], str] | None = None, unique: bool = False) -> None:
        self.kind = kind
        self.fold = fold
        self.unique = unique
        self.aliases: dict[str, str] = {}
        self._entries: dict[str, T | LazyEntry[T]] = {}
        self.version = 0  # counts register and unregister calls: what is derived from the entries is made again

    def register(self, entry: E, name: str | None = None, *, aliases: Iterable[str] = ()) -> E:
        """Add ``entry`` under ``name`` (default: its ``name`` attribute); returns it, so that a
        registry of classes takes this as a class decorator. ``entry`` may be a :class:`LazyEntry`."""
        key = name if name is not None else getattr(entry, "name", "")
        if not key:
            raise ValueError(f"a {self.kind} needs a name")
        if self.unique and key in self._entries:
            raise ValueError(f"{self.kind} {key!r} is already registered")
        self._entries[key] = cast("T | LazyEntry[T]", entry)
        for a in aliases:
            self.aliases[a] = key
        self.version += 1
        return entry

    def register_instance_of(self, cls: type[E]) -> type[E]:
        """A class decorator: register one instance of ``cls`` under its ``name``."""
        self.register(cls())
        return cls

    def unregister(self, name: str) -> None:
        self._entries.pop(name, None)
        self.version += 1

    def key(self, name: str) -> str:
        """The registered name ``name`` stands for (folded, a former name mapped); it may not be registered."""
        key = self.fold(name) if self.fold else name
        return self.aliases.get(key, key)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.key(name) in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def entry(self, name: str) -> T | LazyEntry[T]:
        """What was registered under ``name``, a :class:`LazyEntry` not loaded."""
        key = self.key(name)
        if key not in self._entries:
            raise self.unknown(name)
        return self._entries[key]

    def find(self, name: str) -> T | LazyEntry[T] | None:
        """What was registered under ``name`` (a :class:`LazyEntry` not loaded), or None: not
        registered (one lookup where ``name in registry`` then ``entry(name)`` make two)."""
        return self._entries.get(self.key(name)) if isinstance(name, str) else None

    def get(self, name: str) -> T:
        """The entry called ``name`` (loaded if lazy); an unknown name is a usage error
        naming the closest names and every choice."""
        entry = self.entry(name)
        return entry.load() if isinstance(entry, LazyEntry) else entry

    def entries(self) -> Mapping[str, T | LazyEntry[T]]:
        """name -> what was registered (lazy entries not loaded), in order."""
        return dict(self._entries)

    def items(self) -> list[tuple[str, T]]:
        return [(n, self.get(n)) for n in self._entries]

    def values(self) -> list[T]:
        return [self.get(n) for n in self._entries]

    def unknown(self, name: str, *, among: Iterable[str] | None = None, kind: str | None = None) -> CtxtoolError:
        """The error for a name that is not registered (or not ``among`` the names a use of
        the registry takes, those called ``kind``)."""
        names = list(self._entries if among is None else among)
        aliases = [a for a, n in self.aliases.items() if among is None or n in names]
        close = difflib.get_close_matches(self.key(name), [*names, *aliases], n=3)
        close = list(dict.fromkeys(self.aliases.get(c, c) for c in close))
        hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
        return CtxtoolError(f"unknown {kind or self.kind} {name!r}{hint}; choose one of: {', '.join(names)}",
                            kind=Failure.USAGE)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {list(self._entries)})"

