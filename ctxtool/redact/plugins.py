"""detect-secrets plugins for keys its 1.5 release has no plugin for, written with its plugin
API (a ``RegexBasedDetector`` subclass each) and loaded by path, as detect-secrets loads any
custom plugin (``detect_secrets.core.plugins.initialize.from_file``). This module imports
nothing of ctxtool: detect-secrets imports it on its own."""

from __future__ import annotations

import re

from detect_secrets.plugins.base import RegexBasedDetector


class AnthropicKeyDetector(RegexBasedDetector):
    """Anthropic API and admin keys (``sk-ant-api03-…``, ``sk-ant-admin01-…``)."""

    secret_type = "Anthropic API Key"
    denylist = [re.compile(r"sk-ant-(?:api|admin|oat|sid)\d{2}-[A-Za-z0-9_-]{32,}")]


class GoogleApiKeyDetector(RegexBasedDetector):
    """Google Cloud (GCP) and Gemini API keys (``AIza`` and 35 characters)."""

    secret_type = "Google API Key"
    denylist = [re.compile(r"(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}(?![A-Za-z0-9_-])")]


class HuggingFaceTokenDetector(RegexBasedDetector):
    """Hugging Face access tokens (``hf_`` and 34 letters)."""

    secret_type = "Hugging Face Token"
    denylist = [re.compile(r"(?<![A-Za-z0-9_])hf_[A-Za-z]{34}(?![A-Za-z0-9_])")]
