"""How far token estimates are from what the model recorded, and an estimate fitted to it.
Each turn that records usage (``input + cache_creation + cache_read``, :func:`recorded_input`)
sets each tokenizer's estimate of the context it saw beside the recorded figure
(:func:`accuracy`); ``calibrated`` (:class:`Calibration`) is a linear model of it measured on
held-back turns; where nothing is recorded the family's ratios are used. The model and its
fit: docs/architecture.md, "Tokens and windows"."""
