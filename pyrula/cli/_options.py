"""The options commands share: where the store is, machine-readable output, where to listen.

Kept apart (and importing only typer) so that each command module, the light `pyrula worker`
included, takes them from one place.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

import typer

StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        envvar="PYRULA_STORE",
        show_default=False,
        help="Store folder or postgresql:// URL (default: PYRULA_STORE, else ./.pyrula).",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]

# `--host` and `--port`, the other way to say `--listen HOST:PORT` (for `pyrula ui` and `proxy`).
HostOption = Annotated[
    str | None,
    typer.Option("--host", show_default=False, help="Address to listen on (--listen's HOST part)."),
]
PortOption = Annotated[
    int | None,
    typer.Option(
        "--port",
        min=0,
        max=65535,
        show_default=False,
        help="Port to listen on (--listen's PORT part; 0: any free port).",
    ),
]


def listen_at(
    listen: str | None,
    host: str | None,
    port: int | None,
    *,
    default: str,
    parse: Callable[[str], tuple[str, int]],
) -> tuple[str, int]:
    """`(host, port)` from `--listen HOST:PORT`, `--host` and `--port`.

    Without `--listen`, `--host` and `--port` replace the parts of `default` they name. Beside
    `--listen`, each must say what it says (`parse` reads it): two different addresses are a
    usage error naming both, not one silently winning."""
    if listen is None:
        default_host, default_port = parse(default)
        return (
            host if host is not None else default_host,
            port if port is not None else default_port,
        )
    found_host, found_port = parse(listen)
    for flag, given, found in (("--host", host, found_host), ("--port", port, found_port)):
        if given is not None and given != found:
            raise typer.BadParameter(
                f"{flag} {given} and --listen {listen} name different addresses; give it once: "
                "--listen HOST:PORT, or --host HOST --port PORT",
                param_hint=f"'{flag}'",
            )
    return found_host, found_port
