"""A run's record, its events and its lease as plain values, and how they are stored as JSON."""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass, field
from typing import Any

from pyrula.fingerprints import canonical_json

QUEUED, RUNNING, PARKED = "queued", "running", "parked"
COMPLETED, FAILED, CANCELLED, BUDGET_EXCEEDED = (
    "completed",
    "failed",
    "cancelled",
    "budget_exceeded",
)
TERMINAL = frozenset({COMPLETED, FAILED, CANCELLED, BUDGET_EXCEEDED})
SEQ = struct.Struct(">Q")


def event_key(run_id: str, seq: int) -> bytes:
    """Where a run's event `seq` is kept: the run's events sort together, in order."""
    return run_id.encode() + b"\x00" + SEQ.pack(seq)


def next_seq(txn: Any, events: Any, run_id: str) -> int:
    """The number a fact appended to the run's events now takes: one past its last."""
    prefix = run_id.encode() + b"\x00"
    found = txn.last(events, prefix)
    return 1 if found is None else int(SEQ.unpack(found[0][len(prefix) :])[0]) + 1


@dataclass(frozen=True, slots=True)
class Event:
    """One journaled fact of a run, in order."""

    seq: int
    type: str
    at: float
    payload: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "type": self.type, "at": self.at, "payload": self.payload}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Event:
        return cls(data["seq"], data["type"], data["at"], data["payload"])


@dataclass(frozen=True, slots=True)
class Lease:
    worker: str
    attempt: int


@dataclass
class RunRecord:
    id: str
    name: str
    input: Any
    status: str
    created_at: float
    updated_at: float
    attempt: int = 0
    lease: dict[str, Any] | None = None
    cancel_requested: bool = False
    wake_at: float | None = None
    result: Any = None
    error: dict[str, Any] | None = None
    token: str | None = None
    capture: str = "io"
    options: dict[str, Any] = field(default_factory=dict)
    forked_from: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunRecord:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


def dump_json(value: Any) -> bytes:
    return _encode(value).encode()


# Values a round trip through JSON gives back as they are, with nothing to check: a step's
# commonest results. (An int is one below a bound: past Python's 4,300 digits it cannot be
# written at all, which the round trip raises.)
_AS_THEY_ARE = frozenset({str, bool, type(None)})
_INT_BOUND = 1 << 64


def to_json_value(value: Any) -> Any:
    """Check that a value can be journaled, the way it will come back on replay."""
    kind = type(value)
    if kind in _AS_THEY_ARE or (kind is int and -_INT_BOUND < value < _INT_BOUND):
        return value
    return json.loads(dump_json(value))


def _not_json(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    raise TypeError(
        f"a {type(value).__name__} cannot be journaled: return JSON-compatible values "
        "(dict, list, str, numbers, bool, None, or a pydantic model) from runs, steps and tools"
    )


# One encoder for every call (`json.dumps` with options builds one per call: a fifth of a small
# event's encoding). It keeps no state between calls.
_encode = json.JSONEncoder(separators=(",", ":"), default=_not_json).encode


def input_digest(value: Any) -> str:
    return hashlib.sha256(canonical_json(json.loads(dump_json(value)))).hexdigest()
