"""Compaction: decide, cut, summarize the old part, rebuild the transcript (the Go agent, the
tool-output cache spec, pi-style compaction and adk-code), one module per job: ``settings``,
``view``, ``trigger``, ``layouts``, ``plan``, ``summarize``, ``rebuild``, ``pins``, ``core``
(one transcript, with the guardrails), ``op`` (the runner's operation), ``run`` (files:
:func:`compact_file`), ``report``. The map: docs/architecture.md."""
