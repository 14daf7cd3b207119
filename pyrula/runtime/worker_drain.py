"""A worker's runs in flight, and its drain: asked to stop, it claims nothing more, gives the
runs in flight a grace period to end, then cancels the rest so their leases go back at once.

Each attempt stops at its next boundary while draining (`Attempt.draining`); one cancelled here
is released by the worker (`worker_attempt.py`), its journal kept for the next worker.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from pyrula.runtime.worker_log import fields, log

if TYPE_CHECKING:
    from pyrula.runtime.attempt import Attempt


class InFlight:
    """The bodies a worker is executing, by run id, and whether (and how far) it drains."""

    def __init__(self, grace_seconds: float) -> None:
        self.grace_seconds = grace_seconds
        self.stopping = False
        self.stopped = asyncio.Event()  # set with `stopping`, for a claim loop that waits
        self.release_now = asyncio.Event()
        self.bodies: dict[str, asyncio.Future[Any]] = {}
        self.attempts: dict[str, Attempt] = {}
        # The runs whose attempt the drain cancelled: released, not failed.
        self.released: set[str] = set()
        self.cancelling = False  # past the grace period: an attempt not yet begun is released

    def enter(self, run_id: str, body: asyncio.Future[Any], attempt: Attempt) -> None:
        self.bodies[run_id] = body
        self.attempts[run_id] = attempt
        attempt.draining = self.stopping

    def leave(self, run_id: str) -> None:
        self.bodies.pop(run_id, None)
        self.attempts.pop(run_id, None)
        self.released.discard(run_id)

    def stop(self) -> None:
        """Stop claiming and drain; a second call releases the runs in flight at once."""
        if self.stopping:
            # Cancel at once; again on a later call, for a body that swallowed a cancellation.
            log.warning(
                "releasing %d run(s) now",
                len(self.bodies),
                extra=fields("releasing", in_flight=len(self.bodies)),
            )
            self.release_now.set()
            self.cancel_bodies()
            return
        self.stopping = True
        self.stopped.set()
        for attempt in self.attempts.values():
            attempt.draining = True  # each stops at its next boundary, well inside the grace
        log.warning(
            "draining: claiming no more runs; %d in flight get %gs to finish, then are released "
            "for another worker (stop again to release them now)",
            len(self.bodies),
            self.grace_seconds,
            extra=fields("draining", in_flight=len(self.bodies), grace_s=self.grace_seconds),
        )

    async def drain(self, running: set[asyncio.Task[None]]) -> set[asyncio.Task[None]]:
        """Give the runs in flight the grace period (cut short by a second `stop()`), then cancel
        those still going: each releases its lease, its journal kept for the next worker."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.grace_seconds
        release = asyncio.ensure_future(self.release_now.wait())
        try:
            while running and not self.release_now.is_set():
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                done, _ = await asyncio.wait(
                    {*running, release}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
                )
                for task in done & running:
                    task.result()
                running -= done
        finally:
            release.cancel()
        if self.bodies and not self.release_now.is_set():
            log.warning(
                "grace period over: releasing %d run(s) still in flight",
                len(self.bodies),
                extra=fields("releasing", in_flight=len(self.bodies)),
            )
        self.cancel_bodies()
        return running

    def cancel_bodies(self) -> None:
        self.cancelling = True
        for run_id, body in list(self.bodies.items()):
            if body.cancel():
                self.released.add(run_id)
