"""Measure what a compaction's summary kept (``ctxtool score BEFORE AFTER``): probes drawn from the
part the compaction removed, by score's own rules, checked against the summary's first ``budget``
tokens beside four controls on the same cut, with its false claims, the quality verdict and a
retention curve. Deterministic and offline; ``judge`` optionally asks a model. No module here
imports ``ctxtool.summarizers`` (but for the model interface and the prompt's own texts) or
``ctxtool.compaction``. How it measures: docs/architecture.md, "The grader"."""
