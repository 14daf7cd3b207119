"""Images and PDFs in a request, counted the way a provider bills them, not by their size.

A base64 image is hundreds of kilobytes but is billed as at most a fixed number of input tokens;
counting it at four bytes a token would hold (and estimate) a hundred times too much. Each
image is counted at its provider's per-image upper bound, and each PDF at the per-page bound
times its page count.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

# Anthropic scales an image to at most ~1.15 megapixels, about 1,600 tokens; a PDF page is
# billed as its text (up to ~3,000 tokens) plus an image of the page.
ANTHROPIC_IMAGE_TOKENS = 1_600
ANTHROPIC_PDF_PAGE_TOKENS = 3_000 + ANTHROPIC_IMAGE_TOKENS

_PAGE = re.compile(rb"/Type\s*/Page(?![a-z])")
_BYTES_PER_TOKEN = 4


def pdf_pages(data: bytes) -> int:
    """Page objects in a PDF; at least one (pages packed into compressed streams are not seen)."""
    return max(1, len(_PAGE.findall(data)))


def billable_request_bytes(body: bytes, surface: str) -> int:
    """The request's size for a token estimate, with each Anthropic image or PDF replaced by its
    billing bound (in bytes, at four a token). Other surfaces count their bytes as they are."""
    if not surface.startswith("anthropic.") or b'"source"' not in body:
        return len(body)
    try:
        document = json.loads(body)
    except ValueError:
        return len(body)
    size = len(body)
    for block in _media_blocks(document):
        source = block["source"]
        data = source.get("data") if source.get("type") == "base64" else None
        raw = data.encode() if isinstance(data, str) else b""
        tokens = ANTHROPIC_IMAGE_TOKENS
        if block.get("type") == "document":
            tokens = ANTHROPIC_PDF_PAGE_TOKENS * pdf_pages(_decoded(raw))
        size += tokens * _BYTES_PER_TOKEN - len(raw)
    return max(size, 0)


def _media_blocks(value: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if item.get("type") in ("image", "document") and isinstance(item.get("source"), dict):
                found.append(item)
            else:
                stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _decoded(raw: bytes) -> bytes:
    try:
        return base64.b64decode(raw, validate=False)
    except (binascii.Error, ValueError):
        return b""
