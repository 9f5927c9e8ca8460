"""One image converter: an image block's ``data`` in the shape each format writes. Readers keep
an image as its source object (Anthropic, OpenAI, Codex, pi or ATIF part, or a URL); writers get
their own shape, an image in another converted through its URL or base64 payload."""

from __future__ import annotations

from typing import Any

__all__ = ["anthropic_block", "is_document", "anthropic_source", "codex_part", "data_url", "openai_part", "parse", "pi_part"]

DEFAULT_MIME = "image/png"


def is_document(data: Any) -> bool:
    """An Anthropic ``document`` block (a PDF, a text file) kept as an image block's data."""
    return isinstance(data, dict) and data.get("type") == "document"


def parse(data: Any) -> tuple[str, str, str] | None:
    """``("base64", media type, payload)`` or ``("url", url, "")``; None when unknown."""
    if isinstance(data, str):
        if data.startswith("data:") and ";base64," in data:
            head, b64 = data[5:].split(";base64,", 1)
            return "base64", head or DEFAULT_MIME, b64
        return "url", data, ""
    if not isinstance(data, dict):
        return None
    s = data.get("source")
    src: dict[str, Any] = s if isinstance(s, dict) else data
    if _atif(data):  # ATIF's image source: a file or a URL (a data URL for an inline image)
        path = src["path"]
        return parse(path) if path.startswith("data:") else ("url", path, "")
    if isinstance(src.get("data"), str):
        mime = src.get("media_type") or src.get("mimeType") or src.get("mime_type") or DEFAULT_MIME
        return "base64", str(mime), src["data"]
    iu = data.get("image_url")
    if isinstance(iu, dict):
        iu = iu.get("url")
    if not isinstance(iu, str) and isinstance(data.get("image"), str):
        iu = data["image"]  # Inspect's ContentImage: {"type": "image", "image": URL or data URI}
    url = iu if isinstance(iu, str) else src.get("url")
    return parse(url) if isinstance(url, str) else None


def _atif(data: Any) -> bool:
    """An ATIF image part (``{"type": "image", "source": {"media_type", "path"}}``)."""
    s = data.get("source") if isinstance(data, dict) else None
    return isinstance(s, dict) and isinstance(s.get("path"), str) and "type" not in s


def data_url(data: Any) -> str | None:
    """The image as a URL (a data URL for inline images)."""
    p = parse(data)
    if p is None:
        return None
    kind, a, b = p
    return f"data:{a};base64,{b}" if kind == "base64" else a


def anthropic_source(data: Any) -> Any:
    """An Anthropic image ``source`` (``base64``, ``url`` or ``file``)."""
    if isinstance(data, dict):
        if data.get("type") in ("base64", "url", "file"):
            return data
        if isinstance(data.get("source"), dict) and not _atif(data):
            return data["source"]
    p = parse(data)
    if p is None:
        return data
    kind, a, b = p
    if kind == "base64":
        return {"type": "base64", "media_type": a, "data": b}
    return {"type": "url", "url": a}


def anthropic_block(data: Any) -> dict[str, Any]:
    """An Anthropic ``image`` (or ``document``) content block."""
    if isinstance(data, dict) and data.get("type") in ("image", "document") and "source" in data and not _atif(data):
        return data
    return {"type": "image", "source": anthropic_source(data)}


def openai_part(data: Any) -> dict[str, Any]:
    """An OpenAI Chat Completions ``image_url`` content part."""
    if isinstance(data, dict) and data.get("type") == "image_url":
        return data
    return {"type": "image_url", "image_url": {"url": data_url(data) or ""}}


def codex_part(data: Any) -> dict[str, Any]:
    """A Codex (Responses API) ``input_image`` content item."""
    if isinstance(data, dict) and data.get("type") == "input_image":
        return data
    return {"type": "input_image", "image_url": data_url(data) or ""}


def pi_part(data: Any) -> dict[str, Any] | None:
    """A pi image part (inline base64 only; None for an image pi cannot hold)."""
    if isinstance(data, dict) and data.get("type") == "image" and "data" in data and "source" not in data:
        return data
    p = parse(data)
    if p is None or p[0] != "base64":
        return None
    return {"type": "image", "data": p[2], "mimeType": p[1]}
