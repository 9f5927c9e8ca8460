"""Tokens: the one estimator, exact tokenizers, model windows and prices, how full a context is."""
