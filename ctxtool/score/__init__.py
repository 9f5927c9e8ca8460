"""Measure what a compaction's summary kept (``ctxtool score BEFORE AFTER``).

>>> from ctxtool import formats, score                              # doctest: +SKIP
>>> rep = score.score(next(formats.read("before.jsonl")), next(formats.read("after.jsonl")))
>>> rep.retention, rep.continuation, rep.claims, rep.margins()

The cut splits BEFORE's context into the part the compaction removed, the messages it kept
and what followed. Probes are drawn from the removed part by score's own rules (``records``,
``kinds``, ``text``: nothing is shared with any summarizer or with compaction) and checked
against the summary alone, on its first ``budget`` tokens (3,000 by default); the lists the
pipeline appends to every summary (file lists, the read-set ledger) and pinned messages are
reported apart and never credited. Retention is the weighted mean over the kinds with probes
(goal, open state and continuation weigh most). Every report scores the same cut with four
controls (no summary, a content-free summary, the removed part's identifiers, its tail
verbatim) and gives the summary's margin over each, its false claims about the task's state
(``claims``), the quality rules' verdict (``quality``, the rules ``compact`` applies) and a
retention curve against summary tokens. Deterministic and offline; ``judge`` optionally asks
a model questions drawn from the probes.

* ``records``  what the transcript records: calls, commands, files, runs and their exit
  status, plans; identifiers and values.
* ``probes``   the :class:`Probe`, :class:`ProbeKind` base and registry.
* ``kinds``    the built-in kinds and their weights.
* ``text``     normalized matching (key words in a window, values as written).
* ``claims``   false claims about the task's state.
* ``controls`` the control summaries.
* ``core``     :func:`score`, :func:`cut`, :class:`ScoreReport`.
* ``judge``    ``--judge``: a model answers from the summary, graded against the probes.
* ``quality``  the rejection rules every summary passes before it is used.
* ``recorded`` the compactions a session recorded, scored on the part each replaced.

Import boundary (a test holds it): no module here imports ``ctxtool.summarizers`` or
``ctxtool.compaction``; only ``quality`` reads ``ctxtool.summarizers.prompt``, for the prompt's
own texts (what a summary must not echo). Score never runs a compaction: the caller brings
BEFORE and AFTER (``compact`` scores its own output through :func:`score`).
"""
