"""Images and PDFs in a request, counted the way a provider bills them, not by their size.

A base64 image is hundreds of kilobytes but is billed as at most a fixed number of input tokens;
counting it at four bytes a token would hold (and estimate) a hundred times too much. Each
image is counted at its provider's per-image upper bound, and each PDF at the per-page bound
times its page count. OpenAI's bound depends on the model (`OPENAI_IMAGE`); a name that does not
say which model it is (an Azure deployment) is counted at the largest.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pyrula.runtime.pricing import canonical_model, deployment, requested_model

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

# OpenAI (its vision guide) bills an image in one of two ways. A tile model fits the image in
# 2048 x 2048, scales its short side to 768 and bills a base plus a price per 512 px tile: at most
# 2 x 4 = 8 tiles. A patch model bills one token per 32 px patch, at most 1,536 patches, times a
# multiplier of its own. `detail` is not read: "low" bills less, never more. By canonical model
# id (`canonical_model`); any other name is counted at the largest bound of all.
_TILES = 8
_PATCHES = 1_536


def _tiled(base: int, per_tile: int) -> int:
    return base + _TILES * per_tile


def _patched(multiplier: float) -> int:
    return math.ceil(_PATCHES * multiplier)


OPENAI_IMAGE: dict[str, int] = {
    "gpt-4o": _tiled(85, 170),
    "chatgpt-4o": _tiled(85, 170),
    "gpt-4.1": _tiled(85, 170),
    "gpt-4.5-preview": _tiled(85, 170),
    "gpt-4o-mini": _tiled(2_833, 5_667),
    "o1": _tiled(75, 150),
    "o1-pro": _tiled(75, 150),
    "o3": _tiled(75, 150),
    "computer-use-preview": _tiled(65, 129),
    "gpt-5": _tiled(70, 140),
    "gpt-5-chat": _tiled(70, 140),
    "gpt-4.1-mini": _patched(1.62),
    "gpt-5-mini": _patched(1.62),
    "gpt-4.1-nano": _patched(2.46),
    "gpt-5-nano": _patched(2.46),
    "o4-mini": _patched(1.72),
}
OPENAI_LARGEST = max(OPENAI_IMAGE.values())
# OpenAI reads a PDF as each page's text and an image of the page; a dense page's text is taken
# to be at most ~3,000 tokens, as for Claude.
_PAGE_TEXT = 3_000


def openai_bounds(meta: Mapping[str, Any]) -> Bounds:
    """The bounds of the model a request names; the largest when the name is an alias whose
    model only the reply says (an Azure deployment), or a model this table does not list."""
    model = None if deployment(meta) else requested_model(meta)
    image = OPENAI_IMAGE.get(canonical_model(model), OPENAI_LARGEST) if model else OPENAI_LARGEST
    return Bounds(image=image, pdf_page=_PAGE_TEXT + image)


def pdf_pages(data: bytes) -> int:
    """Page objects in a PDF; at least one (pages packed into compressed streams are not seen)."""
    return max(1, len(_PAGE.findall(data)))


def billable_request_bytes(body: bytes, surface: str, meta: Mapping[str, Any] | None = None) -> int:
    """The request's size for a token estimate, with each image or PDF replaced by its billing
    bound (in bytes, at four a token). Surfaces without such bounds count their bytes as is.
    `meta` is the request's (`Canonical.meta`): it names the model, for OpenAI's bounds."""
    provider = surface.split(".", 1)[0]
    found = _FINDERS.get(provider)
    if found is None:
        return len(body)
    marker = _MARKERS.get(provider)
    if marker is not None and marker.search(body) is None:
        return len(body)  # no media part: nothing to parse (one scan, a third of a parse)
    bounds_of, media = found
    try:
        document = json.loads(body)
    except ValueError:
        return len(body)
    bounds = bounds_of(meta if meta is not None else _top_level(document))
    size = len(body)
    for is_pdf, data in media(document):
        raw = data.encode() if isinstance(data, str) else b""
        tokens = bounds.pdf_page * pdf_pages(_decoded(raw)) if is_pdf else bounds.image
        size += tokens * _BYTES_PER_TOKEN - len(raw)
    return max(size, 0)


def _top_level(document: Any) -> dict[str, Any]:
    return document if isinstance(document, dict) else {}


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


def _openai(document: Any) -> Iterator[tuple[bool, Any]]:
    # Chat: {"type": "image_url", "image_url": {"url": data URL or URL}} and
    # {"type": "file", "file": {"file_data": data URL} or {"file_id"}}. Responses:
    # {"type": "input_image", "image_url": ...} and {"type": "input_file", "file_data": ...}.
    for block in _dicts(document):
        kind = block.get("type")
        if kind in ("image_url", "input_image"):
            image = block.get("image_url")
            yield False, image.get("url") if isinstance(image, dict) else image
        elif kind in ("file", "input_file"):
            file = block.get("file") if kind == "file" else block
            if isinstance(file, dict):
                data = file.get("file_data")
                mime = _data_url_type(data)
                if mime.startswith("image/"):
                    yield False, data
                elif mime in ("", "application/pdf"):  # a PDF, or a file sent by id or URL
                    yield True, data


# The keys an OpenAI media part cannot do without, as they appear in a request's JSON.
_OPENAI_MARKER = re.compile(rb'"(?:image_url|file_(?:data|id|url))"')


def _data_url_type(data: Any) -> str:
    if isinstance(data, str) and data.startswith("data:"):
        return data[5:].split(";", 1)[0].split(",", 1)[0].lower()
    return ""


def _fixed(bounds: Bounds) -> Callable[[Mapping[str, Any]], Bounds]:
    return lambda meta: bounds


_Finder = Callable[[Any], Iterator[tuple[bool, Any]]]
# By provider: the bounds for a request's `meta`, and where its images and PDFs are.
_FINDERS: dict[str, tuple[Callable[[Mapping[str, Any]], Bounds], _Finder]] = {
    "anthropic": (_fixed(CLAUDE), _anthropic),
    "gemini": (_fixed(GEMINI), _gemini),
    "bedrock": (_fixed(CLAUDE), _bedrock),
    "openai": (openai_bounds, _openai),
}
# What a request holds when it may have media in it, by provider (one without a row is parsed).
_MARKERS: dict[str, re.Pattern[bytes]] = {"openai": _OPENAI_MARKER}


def _decoded(raw: bytes) -> bytes:
    if raw.startswith(b"data:"):  # a data URL: `data:<type>;base64,<data>`
        raw = raw.partition(b",")[2]
    try:
        return base64.b64decode(raw, validate=False)
    except (binascii.Error, ValueError):
        return b""
