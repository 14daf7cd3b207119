"""Errors of the `pyrula journal` commands; they live in `pyrula.errors` with every other."""

from __future__ import annotations

from pyrula.errors import AmbiguousRecord, BadExport, JournalCommandError, UnknownRecord

__all__ = ["AmbiguousRecord", "BadExport", "JournalCommandError", "UnknownRecord"]
