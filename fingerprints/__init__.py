"""Request fingerprints: what a replayed provider call must match to reuse a recording.

`canonicalize` reduces an HTTP request to the fields that decide its reply (`compared`, hashed
into `digest`) and the fields kept only for display and metering (`meta`).
"""

from . import surfaces
from ._canonical import FORMAT_VERSION, Canonical, RequestParts, canonical_json, joined_headers
from ._router import canonicalize, surface_of
from .diff import diff, nearest
from .openai_compatible import provider_of
from .sent import cached_or_sent, indexable, sent_digest

__all__ = [
    "FORMAT_VERSION",
    "Canonical",
    "RequestParts",
    "cached_or_sent",
    "canonical_json",
    "canonicalize",
    "diff",
    "indexable",
    "joined_headers",
    "nearest",
    "provider_of",
    "sent_digest",
    "surface_of",
    "surfaces",
]
