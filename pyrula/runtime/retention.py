"""Retention: ended runs are kept for a while, then purged; idempotency tokens last their TTL.

`purge(journal, older_than)` deletes every run that ended (completed, failed, cancelled or over
budget) more than `older_than` seconds ago, with its children, through the store's own
`ended_before` / `purge_run` / `expire_tokens` (see `pyrula.runtime.purging`), so any store that
has those three gets the same policy. `pyrula runs purge --older-than 30d` and
`Worker(retention=...)` (`pyrula worker --retention 30d`) call it.

A child run belongs to its parent: it is purged with it, never before it (a parent still running
replays its children's outcomes), and a child its parent left running is left alone until it
ends on its own.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyrula.runtime.records import TERMINAL, RunRecord

if TYPE_CHECKING:
    from pyrula.runtime.runstore import RunStore

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str | float) -> float:
    """Seconds in `30d`, `12h`, `90m`, `45s`, `2w` or a bare number of seconds."""
    if isinstance(text, int | float):
        seconds = float(text)
    else:
        found = _DURATION.match(text.lower())
        if found is None:
            raise ValueError(
                f"{text!r} is not a duration: write a number and a unit, like 30d, 12h, 90m, 45s "
                "or 2w (a bare number is seconds)"
            )
        seconds = float(found.group(1)) * _UNIT_SECONDS[found.group(2)]
    if seconds < 0:
        raise ValueError(f"a retention cannot be negative ({text!r})")
    return seconds


@dataclass
class Purged:
    """What a purge deleted (or, with `dry_run`, would delete)."""

    runs: list[RunRecord] = field(default_factory=list)
    tokens: int = 0
    dry_run: bool = False

    def to_json(self) -> dict[str, object]:
        return {
            "dry_run": self.dry_run,
            "runs": [
                {"id": r.id, "name": r.name, "status": r.status, "ended_at": r.updated_at}
                for r in self.runs
            ],
            "tokens_expired": self.tokens,
        }


def purge(
    journal: RunStore,
    older_than: float,
    *,
    dry_run: bool = False,
    now: float | None = None,
) -> Purged:
    """Delete the runs that ended more than `older_than` seconds before `now`, their children
    with them, and the idempotency tokens past their TTL. A run that is queued, running or
    parked is never touched; nor is a child whose parent is still kept."""
    moment = time.time() if now is None else now
    report = Purged(dry_run=dry_run)
    for run in journal.ended_before(moment - older_than):
        if _parent(journal, run) is not None:
            continue  # purged with its parent, never before it
        for member in _family(journal, run):
            if dry_run or journal.purge_run(member.id):
                report.runs.append(member)
    if not dry_run:
        report.tokens = journal.expire_tokens(moment)
    return report


def _parent(journal: RunStore, run: RunRecord) -> RunRecord | None:
    """The run that started `run` with `ctx.run_child`, if it is still in the store."""
    parent_id = run.options.get("parent")
    if not isinstance(parent_id, str):
        # A child's id is its parent's id and its position: `PARENT.main.child0`.
        parent_id = next(
            (
                run.id[:cut]
                for cut in range(len(run.id) - 1, 0, -1)
                if run.id[cut] == "." and journal.find(run.id[:cut]) is not None
            ),
            None,
        )
    return journal.find(parent_id) if parent_id is not None else None


def _family(journal: RunStore, run: RunRecord) -> list[RunRecord]:
    """`run` and every ended run below it, children before their parent (so a purge cut short
    never leaves a child whose parent is gone while the child is kept)."""
    members: list[RunRecord] = []
    for event in journal.events(run.id):
        if event.type != "child:started":
            continue
        child = journal.find(str(event.payload.get("child")))
        if child is not None and child.status in TERMINAL:
            members.extend(_family(journal, child))
    members.append(run)
    return members


__all__ = ["Purged", "parse_duration", "purge"]
