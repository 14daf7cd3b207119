"""Images and PDFs count at their provider's billing bounds in a call's estimate."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from pyrula.runtime.media import CLAUDE, GEMINI, billable_request_bytes, pdf_pages

_IMAGE = base64.b64encode(b"\x89PNG" + bytes(300_000)).decode()


def _pdf(pages: int) -> str:
    objects = [f"{n} 0 obj << /Type /Page /Parent 1 0 R >> endobj" for n in range(pages)]
    body = "\n".join(["%PDF-1.4", "1 0 obj << /Type /Pages /Count 9 >> endobj", *objects])
    return base64.b64encode(body.encode()).decode()


def _anthropic(data: str, kind: str) -> dict[str, Any]:
    media = "application/pdf" if kind == "document" else "image/png"
    source = {"type": "base64", "media_type": media, "data": data}
    return {"messages": [{"role": "user", "content": [{"type": kind, "source": source}]}]}


def _gemini(data: str, kind: str) -> dict[str, Any]:
    mime = "application/pdf" if kind == "document" else "image/png"
    return {"contents": [{"role": "user", "parts": [{"inlineData": {"mimeType": mime, "data": data}}]}]}  # noqa: E501


def _bedrock(data: str, kind: str) -> dict[str, Any]:
    block = {kind: {"format": "pdf" if kind == "document" else "png", "source": {"bytes": data}}}
    return {"messages": [{"role": "user", "content": [block]}]}


CASES = {
    "anthropic.messages": (_anthropic, CLAUDE),
    "gemini.generate": (_gemini, GEMINI),
    "bedrock.converse": (_bedrock, CLAUDE),
}


@pytest.mark.parametrize("surface", sorted(CASES))
def test_an_image_counts_at_its_bound_not_its_size(surface):
    build, bounds = CASES[surface]
    body = json.dumps(build(_IMAGE, "image")).encode()
    counted = billable_request_bytes(body, surface)
    assert counted == len(body) - len(_IMAGE) + bounds.image * 4
    assert counted < len(body) / 10


@pytest.mark.parametrize("surface", sorted(CASES))
def test_a_pdf_counts_at_its_per_page_bound_times_its_pages(surface):
    build, bounds = CASES[surface]
    data = _pdf(3)
    body = json.dumps(build(data, "document")).encode()
    assert billable_request_bytes(body, surface) == len(body) - len(data) + 3 * bounds.pdf_page * 4


def test_other_surfaces_and_bad_bodies_count_their_bytes():
    body = json.dumps(_anthropic(_IMAGE, "image")).encode()
    assert billable_request_bytes(body, "openai.chat") == len(body)
    assert billable_request_bytes(b"{not json", "anthropic.messages") == len(b"{not json")


def test_pdf_pages_counts_page_objects_not_the_page_tree():
    assert pdf_pages(base64.b64decode(_pdf(4))) == 4
    assert pdf_pages(b"no pages here") == 1
