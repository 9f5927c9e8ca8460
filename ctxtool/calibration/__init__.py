"""How far token estimates are from what the model recorded, and an estimate fitted to it.

A transcript that records usage says, turn by turn, how many input tokens the provider
counted for the prompt of each API call. ctxtool's model normalizes every format's usage so
that this is ``input + cache_creation + cache_read`` (:func:`recorded_input`): Anthropic's
``input_tokens + cache_creation_input_tokens + cache_read_input_tokens`` (Claude Code, pi),
OpenAI's and Codex's ``input_tokens`` / ``prompt_tokens`` (which include the cached tokens;
the readers split those out as ``cache_read``), Gemini's ``input``.

For each turn that records it, :func:`turn_samples` finds the agent-visible context the call
saw (the messages before the turn, restarted at each compaction) and :func:`accuracy` sets
each tokenizer's estimate of it beside the recorded figure: median and 90th percentile of
the absolute relative error, and the share of turns within ±10 %.

The ``calibrated`` estimate (:class:`Calibration`) is a linear model of the recorded input:
an overhead (what the file does not hold: system prompt, tool schemas) for each stretch
between compactions (:attr:`TurnSample.segment`: a compaction changes it), plus tokens per
character for each content kind (:data:`KINDS`: prose, code, JSON, thinking; at most
:data:`MAX_TOKENS_PER_CHAR`) and tokens per image, fitted by weighted non-negative least
squares (weights ``1 / recorded``, so the relative error is what is minimized), pulled
lightly towards the family's shipped ratios so that a handful of turns cannot produce a wild
fit. Text a publisher replaced with redaction markers that keep the replaced length
(:func:`placeholder_chars`) counts at that length. Its error is measured on held-back turns
only (:data:`SPLITS`): the default, ``alternate``, fits on odd turns and measures even ones;
``half`` fits on the first half and measures the later half (an agent calibrating as it goes
only knows the past).

The default estimate where a file records usage (:func:`usage_aware`, as
:func:`ctxtool.tokens.context.resolve` makes it) is the last recorded usage plus the heuristic count
of what follows; after a compaction with no usage since, the heuristic count alone. Its
error on every usage turn is :attr:`Accuracy.default`.

Where a file records no usage the ratios of the model's family are used
(``ctxtool/data/token_ratios.json``, learned from the corpus by ``make token-ratios``, each
with its measured error): :func:`family_calibration`.
"""
