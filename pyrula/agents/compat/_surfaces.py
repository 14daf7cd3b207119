"""What a surface table is: each drop-in's calls journaled, passed through or refused, as data.

A dotted path is what the caller writes after `client.` (`messages.create`); the longest row
that is a prefix of the called path decides. A path no row covers takes the verdict its nearest
parent in `unlisted` gives: new methods under a generation resource are refused until they are
classified, anything else new counts as one more non-generation surface.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from importlib import metadata
from typing import Any

from pyrula.errors import SurfaceUnavailable


class Verdict(Enum):
    JOURNALED = "journaled"
    PASSED_THROUGH = "passed through"
    REFUSED = "refused"


J, P, R = Verdict.JOURNALED, Verdict.PASSED_THROUGH, Verdict.REFUSED


@dataclass(frozen=True, slots=True)
class Surface:
    path: str
    verdict: Verdict
    fix: str = ""
    since: str = ""  # the first SDK release that has it, where that is after the supported floor


def any_value(value: Any) -> bool:
    return True


def is_true(value: Any) -> bool:
    return value is True


@dataclass(frozen=True, slots=True)
class RefusedArgument:
    """An argument that makes an otherwise journaled call unjournalable: `refused` is asked
    about any value the caller gave (not None, not the SDK's "not given")."""

    surfaces: tuple[str, ...]
    argument: str
    refused: Callable[[Any], bool]
    fix: str


def _no_tool_rule(kind: str | None, tool: Any) -> bool:
    return True


@dataclass(frozen=True)
class SurfaceTable:
    """One provider's table, its refused arguments and which `tools=` entries a run allows."""

    rows: tuple[Surface, ...]
    unlisted: dict[str, Surface]
    refused_arguments: tuple[RefusedArgument, ...] = ()
    tool_surfaces: tuple[str, ...] = ()
    # Whether a `tools=` entry of this `type` (None when it has none) may run in a run.
    tool_allowed: Callable[[str | None, Any], bool] = _no_tool_rule
    tool_fix: str = ""
    sdk: str = ""  # the distribution whose release `Surface.since` names
    _by_path: dict[str, Surface] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_path", {row.path: row for row in self.rows})

    def classify(self, path: str) -> Surface:
        """The row that decides `path`: the longest listed prefix, else its parent's default."""
        parts = path.split(".")
        for end in range(len(parts), 0, -1):
            row = self._by_path.get(".".join(parts[:end]))
            if row is not None:
                return row
        for end in range(len(parts) - 1, -1, -1):
            default = self.unlisted.get(".".join(parts[:end]))
            if default is not None:
                return default
        return self.unlisted[""]

    def unavailable(self, path: str) -> SurfaceUnavailable | None:
        """The error for `path` when the installed SDK has no such attribute but the table lists
        it (or surfaces under it): a release older than the one that brought it. None when the
        table does not know the path (a plain typo keeps Python's own AttributeError)."""
        covered = [r for r in self.rows if r.path == path or r.path.startswith(f"{path}.")]
        if not covered or not self.sdk:
            return None
        since = min((r.since for r in covered if r.since), key=_release, default="")
        return SurfaceUnavailable(self.sdk, _installed(self.sdk), path, since)


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".") if part.isdigit())


def _installed(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "unknown"
