"""Which recordings a pytest session's cassettes used, gathered across pytest-xdist workers, and
which cassettes the session ran whole.

The plugin's summary lists, and `--pyrula-prune-unused` deletes, the recordings of the session's
cassettes that no test used. That is only sound for a cassette every test of which ran: a
cassette shared by several tests (a `name=` on the marker) also holds the recordings of a test
deselected with `-k`, skipped, or never reached. So the session counts, per cassette, the tests
collected to use it and the tests that entered it, and notes a cassette any deselected test uses;
only a cassette entered by all its tests, none deselected, is "whole".

Under pytest-xdist each worker runs some of the tests: it sends what it saw in its
`workeroutput`, and the controller, the one process whose summary is shown, adds them up.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

WIRE = "pyrula_usage"  # the key of a worker's `workeroutput`


@dataclass
class Used:
    """One cassette as the session used it."""

    mode: str
    path: str | None  # its text file, if it is one
    named: bool  # named on the marker: possibly shared by several tests
    keys: set[bytes] = field(default_factory=set)


@dataclass
class Usage:
    cassettes: dict[str, Used] = field(default_factory=dict)
    expected: Counter[str] = field(default_factory=Counter)  # tests collected to run each
    entered: Counter[str] = field(default_factory=Counter)  # tests that entered it
    deselected: set[str] = field(default_factory=set)  # used by a test not run

    def enter(self, name: str, used: Used) -> Used:
        """A test entered cassette `name`: the record of it (`used.keys` to be filled)."""
        self.entered[name] += 1
        return self.cassettes.setdefault(name, used)

    def whole(self, name: str) -> bool:
        """Whether every test of cassette `name` entered it (and none was deselected)."""
        return name not in self.deselected and self.entered[name] >= self.expected[name]

    def to_wire(self) -> dict[str, Any]:
        return {
            "cassettes": {
                name: [u.mode, u.path, u.named, sorted(k.hex() for k in u.keys)]
                for name, u in self.cassettes.items()
            },
            "expected": dict(self.expected),
            "entered": dict(self.entered),
            "deselected": sorted(self.deselected),
        }

    def add_wire(self, wire: dict[str, Any]) -> None:
        """Add what one worker used; every worker collected the same tests."""
        for name, (mode, path, named, keys) in wire["cassettes"].items():
            used = self.cassettes.setdefault(name, Used(mode, path, named))
            used.keys.update(bytes.fromhex(k) for k in keys)
        for name, count in wire["expected"].items():
            self.expected[name] = max(self.expected[name], count)
        self.entered.update(wire["entered"])
        self.deselected.update(wire["deselected"])


__all__ = ["WIRE", "Usage", "Used"]
