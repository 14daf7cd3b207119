"""Gates: a spend budget every model call going out live is held to, before it is sent.

A session decides whether a request is replayed or sent (`core.Session`); a gate, when one is
current, is asked after that, only for a request about to be sent live: it refuses it (by
raising) before anything leaves, or lets it through with a sink of its own that meters the
reply beside the session's. A replay never reaches a gate, so it spends nothing. A case's live
budget (`pyrula.runtime.live_budget`) is the gate; the transports call `gated` and `unsent`.
"""

from __future__ import annotations

from typing import Protocol

from pyrula.fingerprints import Canonical
from pyrula.transport.core import Live, Sink, _Both
from pyrula.transport.current import Current

__all__ = ["Gate", "Metered", "current_gate", "gated", "pop_gate", "push_gate", "unsent"]


class Metered(Sink, Protocol):
    """A gate's sink for one call it let through: told of the reply as any sink is, or that
    none came back (`unsent`: the send raised), so what it held for the call is let go."""

    def unsent(self) -> None: ...


class Gate(Protocol):
    """Holds a call about to go out live: raises to refuse it, or returns the sink that meters
    its reply (None: the call is not metered, say a request that is not a model call)."""

    def admit(self, body: bytes, canonical: Canonical) -> Metered | None: ...


# As the sessions are (`core`): threads started without the caller's context see it too.
_gates: Current[Gate] = Current("pyrula_gate")
current_gate = _gates.get


def push_gate(gate: Gate) -> object:
    """Make `gate` current here (and for threads without a context) until `pop_gate`."""
    return _gates.push(gate)


def pop_gate(gate: Gate, token: object) -> None:
    _gates.pop(gate, token)


def gated(plan: Live, body: bytes, canonical: Canonical) -> Live:
    """`plan`, a request about to be sent live, held to the current gate: refused before it
    is sent, or sent with the gate's meter beside the session's sink (first, so the session's
    sink raising, a recording refused, does not keep the reply from the meter)."""
    gate = current_gate()
    if gate is None:
        return plan
    meter = gate.admit(body, canonical)
    if meter is None:
        return plan
    return Live(meter if plan.sink is None else _Both(meter, plan.sink), meter.unsent)


def unsent(plan: Live) -> None:
    """The send of `plan` raised, or its reply goes to no sink: tell whoever held the call."""
    if plan.unsent is not None:
        plan.unsent()
