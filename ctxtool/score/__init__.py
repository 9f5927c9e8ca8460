"""Measure what a compaction kept (``ctxtool score BEFORE AFTER``).

>>> from ctxtool import formats, score                              # doctest: +SKIP
>>> rep = score.score(next(formats.read("before.jsonl")), next(formats.read("after.jsonl")))
>>> rep.retention, rep.ratio, [p.text for p in rep.lost]

Probes are drawn from the part of BEFORE that AFTER no longer holds verbatim, one
registered kind each (``kinds``): the goal and every user request (the user's own words,
not injected context), constraints and corrections, files modified and read, failed tool
calls with their error and whether they were resolved, identifiers and values, the last plan
and next step. Each is checked against AFTER by normalized matching (``text``). Retention is
reported per kind and overall, with the compression ratio (``ctxtool.tokens``). Deterministic
and offline; ``judge`` optionally asks a model questions drawn from the probes.

* ``probes``   the :class:`Probe`, :class:`ProbeKind` base and registry.
* ``kinds``    the built-in kinds.
* ``text``     normalized matching.
* ``core``     :func:`score`, :class:`ScoreReport`.
* ``judge``    ``--judge``: a model answers from AFTER, graded against BEFORE.
* ``quality``  the rejection rules every summary passes before it is used.
* ``recorded`` the compactions a session recorded, scored on the part each replaced.
"""

from __future__ import annotations

from .core import KindScore, ProbeResult, ScoreReport, score, score_files, score_messages
from .probes import Part, Probe, ProbeKind, get_probe_kind, probe_kinds, register_probe, unregister_probe
from .quality import reject
from .recorded import Recorded, recorded, score_recorded

__all__ = [
    "KindScore",
    "Part",
    "Probe",
    "ProbeKind",
    "ProbeResult",
    "Recorded",
    "ScoreReport",
    "get_probe_kind",
    "probe_kinds",
    "register_probe",
    "recorded",
    "reject",
    "score",
    "score_files",
    "score_messages",
    "score_recorded",
    "unregister_probe",
]
