"""The garbage collector at a command's start and at the process's end.

Importing an SDK creates objects by the hundred thousand (openai's types are some 1,000 modules
of pydantic models) that live as long as the process. While they are being created the collector
keeps traversing them and frees nothing; and when the process exits, the interpreter's final
collections traverse every one of them again to break cycles whose memory the OS takes back
anyway. Measured on `pyrula worker` with an openai app (benchmarks/README.md, bench_import),
the first cost was about 3% of its start and the second about 6% of its whole run.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collection_paused() -> Iterator[None]:
    """No automatic collection inside (while the user's modules import); the collector is left
    as it was found (enabled, unless the caller had disabled it)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def skip_exit_collections() -> None:
    """Called as the process's program ends: every live object moves to the collector's
    permanent generation, which the interpreter's exit does not traverse. What the exit does
    otherwise is unchanged: atexit handlers (logging's flush among them), the join of non-daemon
    threads, and the release of each object no cycle holds."""
    gc.freeze()
