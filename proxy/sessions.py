"""The proxy's side of the journal: one `Cassette` per namespace, kept for the proxy's life.

The proxy plans every request exactly as the in-process transports do (same canonicalizers, same
cassette keys, same occurrence counting), so what one records the other replays. A namespace is
the cassette name: `--cassette NAME` by default, or the request's `x-pyrula-cassette` header.
"""

from __future__ import annotations

import threading

from pyrula.fingerprints import Canonical, RequestParts, canonicalize

from pyrula.cassette import Cassette, Mode
from pyrula.journal.store import Store
from pyrula.transport.core import Live, Plan, Replay, fingerprint_or_replay

# What a replay miss through the proxy tells the user: the proxy's flags and headers, not the
# in-process cassette's modes or pytest's options.
PROXY_MISS_FIX = (
    "Record it with the proxy in --mode auto (records what it has not seen) or --mode record; "
    "check that the client sends the same x-pyrula-cassette header it recorded with."
)
PROXY_REPEAT_FIX = (
    "Record the extra call with --mode auto, or POST /_pyrula/reset (or give each test its own "
    "x-pyrula-cassette header) so repeated identical requests count from the first again."
)


class Sessions:
    """Plans requests against the store; `mode` None forwards everything without journaling."""

    def __init__(self, store: Store | None, mode: Mode | None) -> None:
        self.store = store
        self.mode = mode
        self._cassettes: dict[str, Cassette] = {}
        self._lock = threading.Lock()
        # A store on a server: each plan's reads are a round trip, made off the server's loop.
        self.remote = store is not None and mode is not None and store.remote

    def plan(self, namespace: str, parts: RequestParts) -> tuple[Plan, Canonical | None]:
        """Replay, or go live (recording when `Live.sink` is set). May raise ReplayMiss. The
        canonical form is None only for a replay found by the request's sent digest."""
        if self.mode is None:
            return Live(None), canonicalize(parts)
        cassette = self.cassette(namespace)
        canonical = fingerprint_or_replay(cassette, parts)
        if type(canonical) is Replay:
            return canonical, None
        return cassette.plan(parts, canonical), canonical

    def cassette(self, namespace: str) -> Cassette:
        found = self._cassettes.get(namespace)
        if found is not None:
            return found
        assert self.mode is not None and self.store is not None
        with self._lock:
            found = self._cassettes.get(namespace)
            if found is None:
                found = Cassette(namespace, self.mode, store=self.store)
                found.miss_fix = found.unrecorded_fix = PROXY_MISS_FIX
                found.repeat_fix = PROXY_REPEAT_FIX
                self._cassettes[namespace] = found
            return found

    def reset(self, namespace: str | None = None) -> list[str]:
        """Start counting identical requests from zero again (all namespaces, or one)."""
        with self._lock:
            names = list(self._cassettes) if namespace is None else [namespace]
            for name in names:
                self._cassettes.pop(name, None)
        return names
