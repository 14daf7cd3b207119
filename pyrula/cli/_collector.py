"""The garbage collector at a command's start and at the process's end.

Importing an SDK creates objects by the hundred thousand (openai's types are some 1,000 modules
of pydantic models) that live as long as the process. While they are being created the collector
keeps traversing them and frees nothing; once they exist, each full collection traverses them
again; and when the process exits, the interpreter's final collections traverse every one of
them once more, to break cycles whose memory the OS takes back anyway. On `pyrula worker` with
an openai app that was about 80M instructions before its first run and 140M more at its exit
(benchmarks/README.md, bench_import).

So the `pyrula` program (`main()`, inside `program()`) moves what exists to the collector's
permanent generation (`gc.freeze()`) once the user's modules are imported, and again as it ends;
the collector keeps collecting what is made after. A command invoked in another process's
interpreter (typer's `CliRunner` in tests) only pauses the collector while modules import.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_in_program = False


@contextmanager
def program() -> Iterator[None]:
    """The `pyrula` program runs inside: the process ends with it, and its exit does not
    traverse the objects still alive. Otherwise the exit is unchanged: atexit handlers (logging's
    flush among them), the join of non-daemon threads, the release of each object no cycle
    holds."""
    global _in_program
    _in_program = True
    try:
        yield
    finally:
        gc.freeze()


@contextmanager
def importing() -> Iterator[None]:
    """The user's modules import inside, with no collection meanwhile; in the `pyrula` program
    what they made is then frozen (never traversed again). The collector is left enabled as it
    was found (disabled if the caller had disabled it)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if _in_program:
            gc.freeze()
        if was_enabled:
            gc.enable()
