"""`pyrula ui`: serve the web page over a store (needs the `ui` extra)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Annotated

import typer

from pyrula.cli._options import HostOption, PortOption, listen_at
from pyrula.cli._reporting import reported as _reported
from pyrula.errors import MissingExtra

_NEEDED = ("starlette", "uvicorn", "jinja2", "multipart")
_DEFAULT_LISTEN = "127.0.0.1:8788"


def ui(
    store: Annotated[
        Path | None,
        typer.Option("--store", envvar="PYRULA_STORE", help="Store folder (default: ./.pyrula)."),
    ] = None,
    listen: Annotated[
        str | None,
        typer.Option(
            "--listen",
            metavar="HOST:PORT",
            show_default=False,
            help="Where to listen (default 127.0.0.1:8788; off loopback needs --token).",
        ),
    ] = None,
    host: HostOption = None,
    port: PortOption = None,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="PYRULA_UI_TOKEN",
            help="Required off loopback: the page asks for it (the address printed carries it).",
        ),
    ] = None,
    open_browser: Annotated[bool, typer.Option("--open", help="Open it in a browser.")] = False,
) -> None:
    """Look at recorded exchanges and runs in a browser: list, filter, diff, run timelines (live),
    and the runs' actions as buttons.

    Example: pyrula ui --store ./.pyrula --port 18900 --open
    """
    with _reported(False):
        missing = [name for name in _NEEDED if importlib.util.find_spec(name) is None]
        if missing:
            raise MissingExtra("pyrula ui", "ui", missing)
        from pyrula.ui.serve import UIConfig, parse_listen, serve

        address = listen_at(listen, host, port, default=_DEFAULT_LISTEN, parse=parse_listen)
        config = UIConfig(store, *address, token)
        serve(config, open_browser=open_browser)
