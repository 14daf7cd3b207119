"""One writer at a time for text cassettes (`cassette_file`): the lock their cache's processes
share.

Opening a cassette compares its file with the cache and may rebuild one from the other; a block's
end reads the cache's recordings and writes them as the file. Two processes that do either at once
on one cassette (pytest-xdist workers running tests that share a named cassette) would each write
what they read, the last one's file losing what only the other's held. Both steps therefore run
under an exclusive `flock` on one file in the store's folder (in the system's temporary folder for
a store on a server, keyed by the cassette file's path): the second waits for the first, then reads
what the first committed. The lock is held for a file's read and write only, never for a test.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from pyrula.journal.store import Store

LOCK_NAME = "cassette-files.lock"


def lock_path(store: Store, path: Path) -> Path:
    """The file whose lock guards the text cassette at `path` whose cache is `store`."""
    if store.folder is not None:
        return store.folder / LOCK_NAME
    where = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"pyrula-cassette-{where}.lock"


@contextlib.contextmanager
def held(store: Store, path: Path) -> Iterator[None]:
    """Hold the lock of the text cassette at `path` for the block (not reentrant: each use opens
    the file anew, so a nested use in one process waits for itself)."""
    fd = os.open(lock_path(store, path), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # and so the lock


__all__ = ["LOCK_NAME", "held", "lock_path"]
