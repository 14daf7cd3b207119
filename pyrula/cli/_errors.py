"""Errors of the `pyrula journal` commands. Each message names the fix."""

from __future__ import annotations

from pyrula.errors import PyrulaError


class JournalCommandError(PyrulaError):
    """A `pyrula journal` command could not do what it was asked."""


class UnknownRecord(JournalCommandError):
    """No recorded exchange has an id starting with the given prefix."""


class AmbiguousRecord(JournalCommandError):
    """More than one recorded exchange has an id starting with the given prefix."""

    def __init__(self, prefix: str, candidates: list[str]) -> None:
        self.prefix = prefix
        self.candidates = candidates
        shown = ", ".join(candidates[:8]) + (", ..." if len(candidates) > 8 else "")
        super().__init__(
            f"id prefix {prefix!r} matches {len(candidates)} exchanges ({shown}); "
            "give more characters of the id"
        )


class BadExport(JournalCommandError):
    """A file given to `pyrula journal import` is not a JSONL export this Pyrula can read."""
