"""Opt-in tests against a real model (make test-llm); see conftest.py."""
