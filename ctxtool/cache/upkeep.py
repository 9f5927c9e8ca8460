"""The ref cache's upkeep (the tool-output cache spec): list every ref, verify each, delete, collect
garbage; over ref files and packs alike (:class:`ctxtool.cache.RefCache` inherits it)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..errors import CtxtoolError
from ..io.paths import owner_pid
from .content import line_count
from .ids import REF_IN_TEXT_RE, REF_RE
from .objstore import CacheDir
from .packs import DIR as PACKS_DIR
from .packs import Loc, Packs
from .privdir import not_regular
from .results import GcResult, RefInfo, VerifyResult

STASH_PREFIX = b'{"ctxtool_stash'  # a message's stash, or a transcript's pack of them


class Upkeep:
    """``RefCache``'s listing, checking and collecting; they need what is declared here."""

    packs: Packs

    def manifest(self) -> dict[str, RefInfo]:
        raise NotImplementedError

    def rewrite_manifest(self, keep: set[str]) -> None:
        raise NotImplementedError

    def _refs(self, create: bool = False) -> CacheDir | None:
        raise NotImplementedError

    def _open_packs(self, create: bool) -> CacheDir | None:
        raise NotImplementedError

    def _entries(self) -> tuple[list[str], list[str]]:
        raise NotImplementedError

    def _names(self) -> list[str]:
        raise NotImplementedError

    def _load(self, ref: str, *, keep: bool = True) -> bytes:
        raise NotImplementedError

    def _load_packed(self, ref: str, loc: Loc, *, keep: bool) -> bytes:
        raise NotImplementedError

    def list_refs(self) -> list[RefInfo]:
        """Every ref: manifest entries (marked absent when the file is gone) and unlisted files;
        a ref in a pack counts its entry's size and the pack's time. In a stable order, whatever
        order the manifest's shards were written in (each task of a run writes its own): by
        where each ref first came from (file, then line, a file's refs of no line after its
        lines; each ref's sources so sorted), then by id; refs no source names (unlisted
        files) last, by id."""
        man = self.manifest()
        refs = self._refs()
        names = self._names()
        packed = self.packs.load()
        pdir = self._open_packs(False) if packed else None
        pack_times: dict[str, float | None] = {}
        sizes: dict[str, tuple[int, float | None]] = {}
        for n in names:
            st = refs.lstat(n) if refs is not None else None
            if st is None and n in packed:
                loc = packed[n][0]
                if loc.pack not in pack_times:
                    pst = pdir.lstat(loc.pack) if pdir is not None else None
                    pack_times[loc.pack] = pst.st_mtime if pst is not None else None
                sizes[n] = (loc.length, pack_times[loc.pack])
                continue
            sizes[n] = (st.st_size, st.st_mtime) if st is not None else (0, None)
        out = []
        for ref, info in man.items():
            info.present = ref in sizes
            info.stored_bytes = sizes.get(ref, (0, None))[0]
            out.append(info)
        for ref in names:
            if ref in man:
                continue
            try:
                data: bytes | None = self._load(ref)
            except CtxtoolError:
                data = None
            size, mtime = sizes[ref]
            n_bytes, n_lines = (-1, -1) if data is None else (len(data), line_count(data))
            out.append(RefInfo(ref, n_bytes, n_lines, "unknown", [], mtime, stored_bytes=size))
        for info in out:
            info.sources.sort(key=_source_key)
        out.sort(key=lambda r: (0, _source_key(r.sources[0]), r.id) if r.sources else (1, ("", 0), r.id))
        return out

    def verify(self) -> VerifyResult:
        """Check every ref file, and every ref in every pack, with the same check every read
        makes (:func:`iter_ref`); a pack whose index cannot be read is corrupted as a whole
        (named ``packs/<name>``)."""
        res = VerifyResult()
        man = self.manifest()
        refs = self._refs()
        listing = refs.listdir() if refs is not None else []
        res.stray = sorted(n for n in listing if not REF_RE.match(n) and owner_pid(n) is None)
        files, odd = self._entries()
        packed = self.packs.load(again=True)
        loose = set(files)
        for ref in sorted(set(files + odd).union(packed)):
            res.checked += 1
            problem = ""
            if ref in odd:  # never opened: a link is not followed, a FIFO not waited on
                st = refs.lstat(ref) if refs is not None else None
                problem = not_regular(st.st_mode) if st is not None else "vanished while checked"
            try:
                if ref in loose:
                    self._load(ref, keep=False)
                for loc in packed.get(ref, ()):  # every copy: gc keeps whichever the reads find
                    self._load_packed(ref, loc, keep=False)
            except CtxtoolError as e:
                problem = problem or e.message
            if problem:
                res.corrupted.append(ref)
                res.problems[ref] = problem.removeprefix(f"ref {ref} is corrupted: ").removesuffix(
                    " (run ctxtool refs verify)"
                )
            else:
                res.ok += 1
            if ref not in man:
                res.unlisted.append(ref)
        res.missing = sorted(set(man) - set(files) - set(odd) - set(packed))
        for name in self.packs.names():
            if name not in self.packs.bad:
                continue
            res.checked += 1
            res.corrupted.append(f"{PACKS_DIR}/{name}")
            res.problems[f"{PACKS_DIR}/{name}"] = self.packs.bad[name]
        return res

    def delete(self, refs: Iterable[str]) -> None:
        """Remove ``refs``: their files, and their entries in packs (each pack holding one
        is written again without it)."""
        d = self._refs()
        gone = set()
        for ref in refs:
            if REF_RE.match(ref):
                gone.add(ref)
                if d is not None:
                    d.unlink(ref)
        self.packs.remove(gone)

    # -- garbage collection (the tool-output cache spec) ------------------------------------------------
    def closure(self, roots: Iterable[str]) -> set[str]:
        """``roots`` plus every ref named inside the stashes they reach (refs of refs)."""
        seen: set[str] = set()
        todo = [r for r in roots if isinstance(r, str) and REF_RE.match(r)]
        while todo:
            r = todo.pop()
            if r in seen:
                continue
            seen.add(r)
            try:
                data = self._load(r)
            except CtxtoolError:
                continue  # absent or damaged: names nothing
            if data.startswith(STASH_PREFIX):  # a message's source stash: may name older refs
                for m in REF_IN_TEXT_RE.findall(data.decode("utf-8", "replace")):
                    if m not in seen:
                        todo.append(m)
        return seen

    def gc(self, referenced: Iterable[str], *, dry_run: bool = True) -> GcResult:
        """Delete the ref files nothing in ``referenced`` reaches; ``bytes_freed`` counts their
        size on disk. Only regular files are deleted (``refs verify`` reports anything else)."""
        keep = self.closure(referenced)
        present = [r for r in self.list_refs() if r.present]
        doomed = [r for r in present if r.id not in keep]
        freed = sum(max(0, r.stored_bytes) for r in doomed)
        if not dry_run:
            self.delete(r.id for r in doomed)
            self.rewrite_manifest(keep)
        return GcResult(len(keep), len(present) - len(doomed), doomed, freed, dry_run)


def _source_key(src: dict[str, Any]) -> tuple[str, int]:
    """Where a manifest line says a ref came from, as a sort key: file, then line, a file's
    refs of no line (a whole message's source) after its lines (a manifest is read tolerantly:
    a file of another type sorts as its text, a line that is no whole number as none)."""
    file, line = src.get("file"), src.get("line")
    return ("" if file is None else str(file),
            line if isinstance(line, int) and not isinstance(line, bool) else _NO_LINE)


_NO_LINE = 1 << 62  # after every line number
