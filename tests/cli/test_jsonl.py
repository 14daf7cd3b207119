"""The JSONL interchange format: frames of any bytes, and replies that are not text at all."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import httpx2
from hypothesis import given
from hypothesis import strategies as st

import pyrula
from pyrula.journal.text import frame_bytes, frame_json
from tests.cli.support import Invoke
from tests.fakes.provider import Upstream

BINARY = bytes(range(256)) * 3


@given(st.binary())
def test_any_frame_survives_encoding(frame: bytes) -> None:
    encoded = frame_json(frame)

    assert json.loads(json.dumps(encoded)) == encoded
    assert frame_bytes(encoded) == frame


def test_utf8_frames_are_text_and_others_are_marked_base64() -> None:
    assert frame_json("héllo".encode()) == {"text": "héllo"}
    assert frame_json(b"\xff\x00") == {"base64": base64.b64encode(b"\xff\x00").decode()}


def _record_binary(path: Path) -> None:
    provider = Upstream(
        httpx2, lambda request: (200, {"content-type": "application/octet-stream"}, [BINARY])
    )
    with pyrula.cassette("blob", store=path), provider.http_client(journal={}) as client:
        # A lone surrogate escape is valid JSON that strict UTF-8 cannot carry.
        body = b'{"text": "h\\u00e9llo \\udc00", "n": 0.1}'
        reply = client.post(
            "http://files.test/v1/render?size=2",
            content=body,
            headers={"content-type": "application/json"},
        )
        assert reply.content == BINARY


def test_a_binary_reply_round_trips_and_exports_as_base64_har(
    journal: Invoke, tmp_path: Path
) -> None:
    source, target = tmp_path / "s", tmp_path / "t"
    _record_binary(source)

    first = journal("export", "--store", str(source)).stdout
    (tmp_path / "e.jsonl").write_text(first)
    imported = journal("import", str(tmp_path / "e.jsonl"), "--store", str(target))
    second = journal("export", "--store", str(target)).stdout
    har = json.loads(journal("export", "--format", "har", "--store", str(target)).stdout)

    assert imported.exit_code == 0, imported.output
    assert first.isascii() and second == first
    assert "base64" in json.loads(first)["frames"][0]
    content = har["log"]["entries"][0]["response"]["content"]
    assert content["encoding"] == "base64" and base64.b64decode(content["text"]) == BINARY
    assert har["log"]["entries"][0]["request"]["queryString"] == [{"name": "size", "value": "2"}]
    shown = journal("show", json.loads(first)["record"]["id"], "--store", str(target))
    assert "768 bytes that are not UTF-8 text" in shown.stdout
