"""Whether a run's lease still holds, and who "this host" is.

A lease holds until it expires. One shortcut: a worker on the same host may see that the
holder's process is gone and take the run at once. Across hosts a pid means nothing, so there a
lease only expires. `HOST` is the host's name, or `PYRULA_HOST_ID` where names are not unique
(containers sharing one, a test's process groups standing in for hosts).
"""

from __future__ import annotations

import os
import socket
from typing import Any

HOST = os.environ.get("PYRULA_HOST_ID") or socket.gethostname()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def lease_is_live(lease: dict[str, Any] | None, now: float) -> bool:
    """A lease holds until it expires, or until its process is seen dead on this host."""
    if not lease or lease.get("expires", 0) <= now:
        return False
    return not (lease.get("host") == HOST and not _alive(int(lease.get("pid", 0))))


def lease_key(run_id: str) -> bytes:
    """Where a run's lease holder is kept (the `flags` table), read on every fenced write."""
    return b"lease:" + run_id.encode()


def lease_value(worker: str, attempt: int) -> bytes:
    return f"{worker}\x00{attempt}".encode()
