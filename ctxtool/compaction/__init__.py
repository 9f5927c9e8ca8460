"""Compaction: decide, cut, summarize the old part, rebuild the transcript (the Go agent, the tool-output cache spec, pi-style compaction and adk-code).

>>> from ctxtool import compaction                                   # doctest: +SKIP
>>> report = compaction.compact_file("session.jsonl", "out.jsonl", options=compaction.CompactOptions(force=True))
>>> report.records[0].ratio

One module per job:

* ``settings``   :class:`CompactOptions`, its defaults read once from ``ctxtool.config``.
* ``view``       where the agent's context starts in a transcript that holds compactions.
* ``trigger``    the bridge to the context window and the trigger policies.
* ``layouts``    registered layouts (``summary``, ``retain``, ``initial``): where to cut.
* ``plan``       view + trigger + cut, without a model.
* ``summarize``  the summary over the typed ``Summarizer`` protocol, chunked when needed.
* ``rebuild``    the new transcript; each format records the compaction its own way
                 (``Format.record_compaction``); the Go agent's tool digest via ``ctxtool.history.archive``.
* ``pins``       pinned instructions (``--pin``): kept beside the summary, checked present.
* ``core``       one transcript, with the guardrails on the summary (``--fallback``).
* ``op``         :class:`CompactOp`: compaction as an operation of the one runner
                 (``ctxtool.run.runner``): threads, errors, events, validation of the output.
* ``run``        files: ``compact_file`` and ``compact_paths``, thin over ``ctxtool.run.runner.run_file``.
* ``report``     the typed reports.
"""
