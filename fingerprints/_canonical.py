"""The `Canonical` form of a request and the JSON/digest helpers every canonicalizer shares."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any, NamedTuple

# Bump when any canonicalizer changes what it compares: recorded fingerprints depend on it.
FORMAT_VERSION = 1

# Inline binary below this many characters is cheap to keep and rarely binary.
_BINARY_MIN_CHARS = 256
_BASE64_RE = re.compile(r"^[A-Za-z0-9+/_-]+={0,2}$")
_DATA_URL_RE = re.compile(r"^data:([\w.+/-]+)?(;[\w=.-]+)*;base64,", re.ASCII)
_NO_KEYS: frozenset[str] = frozenset()
# Built once: `json.dumps` with options constructs a fresh encoder on every call.
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
_ASCII_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"))
# The encoders' C cores, built once and called directly: `JSONEncoder.encode` builds a new one
# per call. No circular-reference markers (parsed JSON has no cycles), so a core holds no state
# between calls and threads may share it. None where the C accelerator is missing.
_MAKE_ENCODER: Any = getattr(json.encoder, "c_make_encoder", None)


def _c_core(encoder: json.JSONEncoder, escape: Any) -> Any:
    if _MAKE_ENCODER is None:
        return None
    return _MAKE_ENCODER(None, encoder.default, escape, None, ":", ",", True, False, True)


_ASCII_CORE: Any = _c_core(_ASCII_ENCODER, json.encoder.encode_basestring_ascii)
_CORE: Any = _c_core(_ENCODER, json.encoder.encode_basestring)  # `canonical_json`'s
_QUOTE = json.encoder.encode_basestring
_DECODER = json.JSONDecoder()  # provider bodies are UTF-8; `json.loads` would sniff for UTF-16/32


class NotThisSurface(ValueError):
    """A request reached a provider route but is not that provider's call (wrong body shape).

    The router answers it by fingerprinting the request generically, which compares the whole
    body and so can only be stricter than the provider form.
    """


class RequestParts(NamedTuple):
    """A stack-neutral view of one HTTP request: what every canonicalizer reads (immutable; a
    tuple, built per request at a fraction of a frozen dataclass's cost)."""

    method: str
    url: str
    # Lower-case names, or a case-insensitive mapping such as httpx's own `Headers`.
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        """The body parsed as JSON, or None when it is empty or not JSON."""
        if not self.body:
            return None
        try:
            return _DECODER.decode(self.body.decode("utf-8"))
        # RecursionError: a hostile or broken body nested deeper than the parser allows.
        except (ValueError, UnicodeDecodeError, RecursionError):
            return None


def joined_headers(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Header pairs as `RequestParts.headers` holds them where the stack gives pairs (botocore, a
    vcrpy cassette): lower-case names, a repeated header's values joined by ", ", as httpx's own
    mapping reads them (and so as a fingerprint reads them live)."""
    joined: dict[str, str] = {}
    for name, value in pairs:
        name = name.lower()
        joined[name] = f"{joined[name]}, {value}" if name in joined else value
    return joined


class Canonical(NamedTuple):
    """A request reduced to what decides its reply (immutable; a tuple, built per new request at
    a fraction of a frozen dataclass's cost).

    `compared` holds the fields a replay must match; `meta` holds what is kept for display and
    metering but never compared (model, sampling). Both are JSON-ready, with inline binary already
    replaced by digests, so neither ever carries an image or a PDF.
    """

    surface: str
    compared: dict[str, Any]
    meta: dict[str, Any] = {}
    stream: bool = False
    digest: str = ""

    @classmethod
    def build(
        cls,
        surface: str,
        compared: dict[str, Any],
        meta: dict[str, Any] | None = None,
        *,
        stream: bool = False,
    ) -> Canonical:
        return cls(surface, compared, meta or {}, stream, fingerprint(surface, compared))


def fingerprint(surface: str, compared: Mapping[str, Any]) -> str:
    """The sha256 of `{"compared": ..., "surface": ..., "v": FORMAT_VERSION}` as canonical JSON
    with every non-ASCII character escaped (the stable, documented digest input)."""
    # Assembled from pieces, in sorted key order, to skip building and sorting the wrapper dict on
    # every replayed request. ASCII escapes keep the encoder on its fast path.
    digest = hashlib.sha256(b'{"compared":')
    digest.update(ascii_json(compared))
    digest.update(_trailer(surface))
    return digest.hexdigest()


def ascii_json(value: Any) -> bytes:
    """`value` as canonical JSON (sorted keys, no spaces) with every non-ASCII character
    escaped, through the prebuilt C encoder where there is one."""
    if _ASCII_CORE is not None:
        return "".join(_ASCII_CORE(value, 0)).encode("ascii")
    return _ASCII_ENCODER.encode(value).encode("ascii")


@lru_cache(maxsize=64)
def _trailer(surface: str) -> bytes:
    return b',"surface":%s,"v":%d}' % (_ASCII_ENCODER.encode(surface).encode(), FORMAT_VERSION)


def canonical_json(value: Any) -> bytes:
    """Serialise with sorted keys and fixed separators: one byte string per JSON value."""
    # JSON may carry a lone surrogate escape ("\ud800"); strict UTF-8 would refuse to encode it.
    # A string is quoted at once (as `JSONEncoder.encode` would), anything else goes through the
    # prebuilt core, which spares building an encoder per call (recording encodes every part of
    # a request).
    if type(value) is str:
        return _QUOTE(value).encode("utf-8", "surrogatepass")
    if _CORE is None:
        return _ENCODER.encode(value).encode("utf-8", "surrogatepass")
    return "".join(_CORE(value, 0)).encode("utf-8", "surrogatepass")


def binary_digest(data: bytes | str) -> dict[str, str]:
    """The stand-in kept instead of inline binary: compared by digest, never stored."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    return {"$digest": "sha256:" + hashlib.sha256(raw).hexdigest(), "$bytes": str(len(raw))}


def looks_like_base64(text: str) -> bool:
    if len(text) < _BINARY_MIN_CHARS or len(text) % 4 == 1:
        return False
    if not _BASE64_RE.match(text[:512]) or not _BASE64_RE.match(text[-512:]):
        return False
    try:
        base64.b64decode(text[: 512 - 512 % 4] or "", validate=False)
    except (binascii.Error, ValueError):
        return False
    return True


def strip_binary(value: Any, digest_keys: frozenset[str] = _NO_KEYS) -> Any:
    """Replace inline binary (base64 strings, data: URLs) anywhere in `value` by its digest.

    A string under a key in `digest_keys` is digested whatever its length: those are fields a
    provider documents as bytes. Integral floats become ints, since `1.0` and `1` are one JSON
    number and serialisers disagree on which to write.
    """
    if digest_keys:
        return _strip_keyed(value, digest_keys)
    return _strip(value)


# Two copies of one walk, each with exact type checks: this runs over every request body, and
# JSON parsing only ever yields these exact types. A short string, the commonest value, is kept
# where it stands without a call.
def _strip(value: Any) -> Any:
    kind = type(value)
    if kind is str:
        return value if len(value) < _BINARY_MIN_CHARS else _strip_str(value)
    if kind is dict:
        return {
            k: v if type(v) is str and len(v) < _BINARY_MIN_CHARS else _strip(v)
            for k, v in value.items()
        }
    if kind is list:
        return [v if type(v) is str and len(v) < _BINARY_MIN_CHARS else _strip(v) for v in value]
    if kind is float and value.is_integer():
        return int(value)
    return value


def _strip_keyed(value: Any, digest_keys: frozenset[str]) -> Any:
    kind = type(value)
    if kind is str:
        return value if len(value) < _BINARY_MIN_CHARS else _strip_str(value)
    if kind is dict:
        return {
            k: binary_digest(v)
            if k in digest_keys and type(v) is str
            else _strip_keyed(v, digest_keys)
            for k, v in value.items()
        }
    if kind is list:
        return [_strip_keyed(v, digest_keys) for v in value]
    if kind is float and value.is_integer():
        return int(value)
    return value


def _strip_str(value: str) -> Any:
    if value.startswith("data:") and _DATA_URL_RE.match(value):
        head, _, payload = value.partition(",")
        return {"$data_url": head, **binary_digest(payload)}
    if looks_like_base64(value):
        return binary_digest(value)
    return value


def pick(
    body: Mapping[str, Any], names: Iterable[str], digest_keys: frozenset[str] = _NO_KEYS
) -> dict[str, Any]:
    """The named fields that are set, with inline binary replaced by digests.

    A field sent as `null` counts as unset: SDKs differ in whether they send or omit it, and the
    providers read both the same way.
    """
    return {
        name: strip_binary(body[name], digest_keys) for name in names if body.get(name) is not None
    }


def rest(body: Mapping[str, Any], taken: frozenset[str]) -> dict[str, Any]:
    """Every set field not in `taken`, binary stripped: the `meta` side of a canonicalizer."""
    return {
        name: strip_binary(value)
        for name, value in body.items()
        if value is not None and name not in taken
    }


def json_object(body: Any, required_any: tuple[str, ...]) -> dict[str, Any]:
    """`body` as a provider call's JSON object, or `NotThisSurface`.

    `required_any` guards a route whose path another API could share (`/responses`): a body with
    none of those fields is some other call, and comparing it on the provider's few fields would
    let two different requests share a fingerprint.
    """
    if not isinstance(body, dict):
        raise NotThisSurface("body is not a JSON object")
    if required_any and not any(body.get(name) is not None for name in required_any):
        raise NotThisSurface(f"body has none of {', '.join(required_any)}")
    return body
