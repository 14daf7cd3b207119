"""Converting vcrpy (and pytest-recording) YAML cassettes into Pyrula text cassettes.

Each interaction is fingerprinted by its provider's canonicalizer, as a live call would be, and
written through the same recorder (so scrubbed the same way); a streamed body, which vcrpy keeps
whole, is split back into its frames (one per SSE event, one per AWS event-stream message). The
file `x.yaml` becomes `x.json` beside it. What cannot be converted is reported with its reason,
never dropped silently.
"""

from __future__ import annotations

import base64
import struct
import tempfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyrula.errors import MissingExtra
from pyrula.fingerprints import RequestParts, canonicalize, joined_headers
from pyrula.journal import cassette_file
from pyrula.journal.exchanges import Exchanges
from pyrula.journal.keys import cassette_key
from pyrula.journal.recorder import Reply, record_exchange
from pyrula.journal.store import Store

_NAME = "import-vcr"
_STREAM_TYPES = ("text/event-stream", "application/vnd.amazon.eventstream")


@dataclass
class Converted:
    """One YAML cassette's outcome: where it went, how many interactions, and what was left."""

    source: Path
    target: Path | None = None
    converted: int = 0
    skipped: list[str] = field(default_factory=list)  # "interaction N: why"


def convert(paths: Iterable[Path], *, out: Path | None = None) -> list[Converted]:
    """Convert every YAML cassette in `paths` (files, or folders searched for *.yaml / *.yml);
    each goes beside its source, or under `out` keeping its path below the folder given."""
    results = []
    with tempfile.TemporaryDirectory(prefix="pyrula-import-vcr-") as scratch:
        store = Store(Path(scratch) / "store")
        try:
            for root, source in _sources(paths):
                target = source.with_suffix(cassette_file.SUFFIX)
                if out is not None:
                    target = out / source.relative_to(root).with_suffix(cassette_file.SUFFIX)
                results.append(_convert_one(store, source, target))
        finally:
            store.close()
    return results


def _sources(paths: Iterable[Path]) -> Iterable[tuple[Path, Path]]:
    for path in paths:
        if path.is_dir():
            for found in sorted([*path.rglob("*.yaml"), *path.rglob("*.yml")]):
                yield path, found
        else:
            yield path.parent, path


def _convert_one(store: Store, source: Path, target: Path) -> Converted:
    result = Converted(source)
    try:
        document = _load_yaml(source)
    except ValueError as exc:
        result.skipped.append(f"the file: {exc}")
        return result
    interactions = document.get("interactions") if isinstance(document, dict) else None
    if not isinstance(interactions, list):
        result.skipped.append("the file: not a vcrpy cassette (no interactions list)")
        return result
    name = f"{_NAME}\x00{source}"
    exchanges = Exchanges(store)
    seen: dict[str, int] = {}
    for index, interaction in enumerate(interactions):
        try:
            parts, reply = _exchange(interaction)
        except (ValueError, KeyError, TypeError) as exc:
            result.skipped.append(f"interaction {index}: {exc}")
            continue
        canonical = canonicalize(parts)
        occurrence = seen.get(canonical.digest, 0)
        seen[canonical.digest] = occurrence + 1
        key = cassette_key(name, canonical.digest, occurrence)
        record_exchange(exchanges, key, parts, canonical, reply, namespace=name, index_sent=True)
        result.converted += 1
    if result.converted:
        cassette_file.save(store, name, target)
        result.target = target
    return result


def _load_yaml(path: Path) -> Any:
    try:
        import yaml
    except ImportError as exc:  # the `vcr` extra brings it
        raise MissingExtra("reading vcrpy cassettes", "vcr", (exc.name,), needs="PyYAML") from exc
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(path.read_text("utf-8"), Loader=loader)  # a safe loader
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ValueError(f"not readable YAML ({exc})") from None


def _exchange(interaction: Any) -> tuple[RequestParts, Reply]:
    request, response = interaction["request"], interaction["response"]
    if not isinstance(request, dict) or not isinstance(response, dict):
        raise ValueError("not a request/response pair")
    parts = RequestParts(
        method=str(request["method"]).upper(),
        url=str(request["uri"]),
        # A repeated header joined, not its last value alone: each value of a credential is a
        # secret to mask (`scrub.secret_values`).
        headers=joined_headers(_headers(request.get("headers") or {})),
        body=_bytes(request.get("body")),
    )
    if "status" in response:
        status = int(response["status"]["code"])
        body = response.get("body") or {}
        content = _bytes(body.get("string") if isinstance(body, dict) else body)
    elif "status_code" in response:  # vcrpy's older httpx layout
        status = int(response["status_code"])
        content = _bytes(response.get("content"))
    else:
        raise ValueError("the response has no status")
    reply_headers = _headers(response.get("headers") or {})
    lowered = {k.lower(): v for k, v in reply_headers}
    content = _decoded(content, lowered.get("content-encoding", "").strip().lower())
    reply_headers = [(k, v) for k, v in reply_headers if k.lower() != "content-encoding"]
    content_type = lowered.get("content-type", "")
    streamed = any(kind in content_type for kind in _STREAM_TYPES)
    if streamed and "eventstream" in content_type:
        frames = _eventstream_frames(content)
    elif streamed:
        frames = _sse_frames(content)
    else:
        frames = [content]
    reply = Reply(
        status=status, headers=reply_headers, frames=frames, elapsed_ms=0.0, streamed=streamed
    )
    return parts, reply


def _headers(value: Any) -> list[tuple[str, str]]:
    if not isinstance(value, dict):
        raise ValueError("headers are not a mapping")
    pairs = []
    for name, values in value.items():
        for item in values if isinstance(values, list) else [values]:
            pairs.append((str(name), str(item)))
    return pairs


def _bytes(value: Any) -> bytes:
    if value is None:
        return b""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, dict) and "string" in value:
        return _bytes(value["string"])
    if isinstance(value, dict) and "base64_string" in value:
        return base64.b64decode(value["base64_string"])
    raise ValueError(f"a body of type {type(value).__name__} is not bytes or text")


def _decoded(content: bytes, encoding: str) -> bytes:
    """The body as the SDK reads it. vcrpy's httpx stubs keep it decoded while the header still
    names the coding; its requests and urllib3 stubs keep it coded (unless told to decode)."""
    if encoding in ("", "identity") or not content:
        return content
    try:
        content.decode("utf-8")
        return content  # already text: decoded
    except UnicodeDecodeError:
        pass
    if encoding in ("gzip", "x-gzip", "deflate"):
        for wbits in (47, -15):  # gzip or zlib (auto-detected), then raw deflate
            try:
                return zlib.decompress(content, wbits)
            except zlib.error:
                continue
    raise ValueError(
        f"its body is {encoding}-encoded as vcrpy stored it and cannot be decoded here; "
        "record it again with decode_compressed_response=True, or with Pyrula"
    )


def _sse_frames(content: bytes) -> list[bytes]:
    """A whole SSE body split after each event's blank line, every byte kept."""
    frames: list[bytes] = []
    start = 0
    index = 0
    while index < len(content):
        for end in (b"\r\n\r\n", b"\n\n", b"\r\r"):
            if content.startswith(end, index):
                frames.append(content[start : index + len(end)])
                start = index = index + len(end)
                break
        else:
            index += 1
    if start < len(content):
        frames.append(content[start:])
    return frames


def _eventstream_frames(content: bytes) -> list[bytes]:
    """An AWS event-stream body split into its messages by their length prelude."""
    frames = []
    offset = 0
    while offset + 4 <= len(content):
        (length,) = struct.unpack_from(">I", content, offset)
        if length < 16 or offset + length > len(content):
            raise ValueError("its event-stream body is truncated")
        frames.append(content[offset : offset + length])
        offset += length
    if offset != len(content):
        raise ValueError("its event-stream body has trailing bytes")
    return frames
