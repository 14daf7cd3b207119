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
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

_BYTES_PER_TOKEN = 4
_PAGE = re.compile(rb"/Type\s*/Page(?![a-z])")


@dataclass(frozen=True, slots=True)
class Bounds:
    image: int  # tokens an image is billed as, at most
    pdf_page: int  # tokens a PDF page is billed as, at most


# Anthropic scales an image to at most ~1.15 megapixels, about 1,600 tokens; a PDF page is
# billed as its text (up to ~3,000 tokens) plus an image of the page. Bedrock serves several
# families: Claude's bounds are the largest, so they stand for all of them.
CLAUDE = Bounds(image=1_600, pdf_page=3_000 + 1_600)
# Gemini bills an image at most 1,120 tokens and a PDF page 560 (at its highest media resolution).
GEMINI = Bounds(image=1_120, pdf_page=560)


def pdf_pages(data: bytes) -> int:
    """Page objects in a PDF; at least one (pages packed into compressed streams are not seen)."""
    return max(1, len(_PAGE.findall(data)))


def billable_request_bytes(body: bytes, surface: str) -> int:
    """The request's size for a token estimate, with each image or PDF replaced by its billing
    bound (in bytes, at four a token). Surfaces without such bounds count their bytes as is."""
    found = _FINDERS.get(surface.split(".", 1)[0])
    if found is None:
        return len(body)
    bounds, media = found
    try:
        document = json.loads(body)
    except ValueError:
        return len(body)
    size = len(body)
    for is_pdf, data in media(document):
        raw = data.encode() if isinstance(data, str) else b""
        tokens = bounds.pdf_page * pdf_pages(_decoded(raw)) if is_pdf else bounds.image
        size += tokens * _BYTES_PER_TOKEN - len(raw)
    return max(size, 0)


def _dicts(value: Any) -> Iterator[dict[str, Any]]:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _anthropic(document: Any) -> Iterator[tuple[bool, Any]]:
    # {"type": "image" | "document", "source": {"type": "base64", "data": ...} or a URL}
    for block in _dicts(document):
        source = block.get("source")
        if block.get("type") in ("image", "document") and isinstance(source, dict):
            data = source.get("data") if source.get("type") == "base64" else None
            yield block["type"] == "document", data


def _gemini(document: Any) -> Iterator[tuple[bool, Any]]:
    # {"inlineData": {"mimeType": ..., "data": base64}} or {"fileData": {"mimeType", "fileUri"}}
    for part in _dicts(document):
        for key in ("inlineData", "inline_data", "fileData", "file_data"):
            blob = part.get(key)
            if isinstance(blob, dict):
                mime = str(blob.get("mimeType") or blob.get("mime_type") or "")
                if mime.startswith("image/") or mime == "application/pdf":
                    yield mime == "application/pdf", blob.get("data")


def _bedrock(document: Any) -> Iterator[tuple[bool, Any]]:
    # converse: {"image": {"format", "source": {"bytes": base64}}}, {"document": {...}}
    for block in _dicts(document):
        for key in ("image", "document"):
            media = block.get(key)
            source = media.get("source") if isinstance(media, dict) else None
            if isinstance(source, dict):
                yield key == "document", source.get("bytes")


_FINDERS = {"anthropic": (CLAUDE, _anthropic), "gemini": (GEMINI, _gemini), "bedrock": (CLAUDE, _bedrock)}  # noqa: E501


def _decoded(raw: bytes) -> bytes:
    try:
        return base64.b64decode(raw, validate=False)
    except (binascii.Error, ValueError):
        return b""
