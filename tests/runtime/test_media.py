"""Images and PDFs count at their provider's billing bounds in a call's estimate."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from pyrula.runtime.media import (
    CLAUDE,
    GEMINI,
    OPENAI_LARGEST,
    Bounds,
    billable_request_bytes,
    openai_bounds,
    pdf_pages,
)

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
    return {
        "contents": [{"role": "user", "parts": [{"inlineData": {"mimeType": mime, "data": data}}]}]
    }


def _bedrock(data: str, kind: str) -> dict[str, Any]:
    block = {kind: {"format": "pdf" if kind == "document" else "png", "source": {"bytes": data}}}
    return {"messages": [{"role": "user", "content": [block]}]}


def _data_url(data: str, kind: str) -> str:
    return f"data:{'application/pdf' if kind == 'document' else 'image/png'};base64,{data}"


def _openai_chat(data: str, kind: str) -> dict[str, Any]:
    if kind == "document":
        part = {"type": "file", "file": {"filename": "a.pdf", "file_data": _data_url(data, kind)}}
    else:
        part = {"type": "image_url", "image_url": {"url": _data_url(data, kind), "detail": "high"}}
    return {"model": "gpt-4o-2024-08-06", "messages": [{"role": "user", "content": [part]}]}


def _openai_responses(data: str, kind: str) -> dict[str, Any]:
    if kind == "document":
        part = {"type": "input_file", "filename": "a.pdf", "file_data": _data_url(data, kind)}
    else:
        part = {"type": "input_image", "image_url": _data_url(data, kind)}
    return {"model": "gpt-4o", "input": [{"role": "user", "content": [part]}]}


# gpt-4o: 85 tokens plus 170 for each of at most 8 tiles; a PDF page is its text and an image.
GPT_4O = Bounds(image=1_445, pdf_page=3_000 + 1_445)
CASES = {
    "anthropic.messages": (_anthropic, CLAUDE),
    "gemini.generate": (_gemini, GEMINI),
    "bedrock.converse": (_bedrock, CLAUDE),
    "openai.chat": (_openai_chat, GPT_4O),
    "openai.responses": (_openai_responses, GPT_4O),
}


def _size_of(build: Any, data: str, kind: str) -> int:
    """How many bytes `data` takes in the body: an OpenAI body carries it in a data URL."""
    encoded = json.dumps(build(data, kind))
    return len(_data_url(data, kind)) if _data_url(data, kind) in encoded else len(data)


@pytest.mark.parametrize("surface", sorted(CASES))
def test_an_image_counts_at_its_bound_not_its_size(surface):
    build, bounds = CASES[surface]
    body = json.dumps(build(_IMAGE, "image")).encode()
    counted = billable_request_bytes(body, surface)
    assert counted == len(body) - _size_of(build, _IMAGE, "image") + bounds.image * 4
    assert counted < len(body) / 10


@pytest.mark.parametrize("surface", sorted(CASES))
def test_a_pdf_counts_at_its_per_page_bound_times_its_pages(surface):
    build, bounds = CASES[surface]
    data = _pdf(3)
    body = json.dumps(build(data, "document")).encode()
    size = _size_of(build, data, "document")
    assert billable_request_bytes(body, surface) == len(body) - size + 3 * bounds.pdf_page * 4


def test_other_surfaces_and_bad_bodies_count_their_bytes():
    body = json.dumps(_anthropic(_IMAGE, "image")).encode()
    assert billable_request_bytes(body, "generic") == len(body)
    assert billable_request_bytes(b"{not json", "anthropic.messages") == len(b"{not json")


@pytest.mark.parametrize(
    ("meta", "image"),
    [
        ({"model": "gpt-4o-2024-08-06"}, 85 + 8 * 170),
        ({"model": "gpt-4o-mini"}, 2_833 + 8 * 5_667),  # the largest of all
        ({"model": "gpt-4.1-nano"}, 3_779),  # 1,536 patches, times 2.46
        ({"model": "o3"}, 75 + 8 * 150),
        ({"model": "gpt-6-luna"}, OPENAI_LARGEST),  # a model the table does not list
        # An Azure deployment's name does not say which model serves it, even when it looks
        # like one: counted at the largest bound.
        ({"model": "gpt-4o", "deployment": "gpt-4o"}, OPENAI_LARGEST),
        ({"model": "team-prod", "query": {"api-version": "2024-10-21"}}, OPENAI_LARGEST),
    ],
    ids=["gpt-4o", "gpt-4o-mini", "patches", "o3", "unlisted", "deployment", "azure_query"],
)
def test_an_openai_image_counts_at_its_models_bound(meta, image):
    assert OPENAI_LARGEST == 48_169
    assert openai_bounds(meta) == Bounds(image=image, pdf_page=3_000 + image)
    body = json.dumps({**_openai_chat(_IMAGE, "image"), "model": meta["model"]}).encode()
    size = len(_data_url(_IMAGE, "image"))
    assert billable_request_bytes(body, "openai.chat", meta) == len(body) - size + image * 4


def test_an_openai_image_by_url_or_file_id_counts_at_its_bound_too():
    parts = [
        {"type": "input_image", "image_url": "https://example.test/cat.png"},
        {"type": "input_file", "file_id": "file-abc"},  # a PDF of pages unknown: one page
        {"type": "input_file", "file_data": "data:text/plain;base64,aGk="},  # not media: as is
    ]
    body = json.dumps({"model": "gpt-4o", "input": [{"role": "user", "content": parts}]})
    expected = len(body) - len("https://example.test/cat.png") + (1_445 + 4_445) * 4
    assert billable_request_bytes(body.encode(), "openai.responses") == expected


def test_pdf_pages_counts_page_objects_not_the_page_tree():
    assert pdf_pages(base64.b64decode(_pdf(4))) == 4
    assert pdf_pages(b"no pages here") == 1


def test_an_openai_request_without_media_counts_its_bytes():
    body = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "Ping?"}]})
    assert billable_request_bytes(body.encode(), "openai.chat") == len(body)
