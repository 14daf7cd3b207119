"""Starting the page: where it listens, the token rule, and uvicorn."""

from __future__ import annotations

import ipaddress
import os
import secrets
import socket
import webbrowser
from dataclasses import dataclass
from pathlib import Path

import uvicorn
from starlette.applications import Starlette

from pyrula.errors import UIConfigError
from pyrula.ui.app import create_app
from pyrula.ui.live import end_streams

TOKEN_ENV = "PYRULA_UI_TOKEN"
MIN_TOKEN_CHARS = 16
DEFAULT_PORT = 8788


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def parse_listen(listen: str) -> tuple[str, int]:
    """`HOST:PORT`, `:PORT`, or `HOST` alone (IPv6 in brackets: `[::1]:8788`)."""
    if listen.startswith("["):
        host, _, rest = listen[1:].partition("]")
        port = rest.removeprefix(":")
    elif listen.count(":") == 1:
        host, port = listen.split(":")
    else:
        host, port = listen, ""
    try:
        number = int(port) if port else DEFAULT_PORT
    except ValueError:
        raise UIConfigError(f"--listen {listen!r}: the port must be a number (HOST:PORT)") from None
    if not 0 <= number <= 65535:
        raise UIConfigError(f"--listen {listen!r}: port {number} is out of range 0-65535")
    return host or "127.0.0.1", number


@dataclass(frozen=True, slots=True)
class UIConfig:
    """What `pyrula ui` takes. Off loopback a token is required (the proxy's rule)."""

    store: Path | None = None
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    token: str | None = None

    def __post_init__(self) -> None:
        if self.token is not None and len(self.token) < MIN_TOKEN_CHARS:
            raise UIConfigError(
                f"the UI token must be at least {MIN_TOKEN_CHARS} characters; generate one "
                'with: python -c "import secrets; print(secrets.token_urlsafe())"'
            )
        if not is_loopback(self.host) and self.token is None:
            raise UIConfigError(
                f"--listen {self.host}: off loopback anyone who reaches the address could read "
                f"your recordings and drive your runs; pass --token (or set ${TOKEN_ENV}), or "
                "listen on 127.0.0.1"
            )

    def address(self, port: int | None = None) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        query = f"/?token={self.token}" if self.token else "/"
        return f"http://{host}:{self.port if port is None else port}{query}"


def new_token() -> str:
    return secrets.token_urlsafe(24)


class AppServer(uvicorn.Server):
    """uvicorn's server for the page's app (`create_app`): when it shuts down it first ends the
    live streams, which would otherwise hold their connections open (uvicorn waits for every
    open response before it stops)."""

    def __init__(self, app: Starlette, host: str, port: int) -> None:
        self.app = app
        super().__init__(uvicorn.Config(app, host=host, port=port, log_level="warning"))

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        end_streams(self.app)
        await super().shutdown(sockets)


class _Server(AppServer):
    """The page's server, saying where the page is once it listens (`--listen HOST:0`: the
    port the system chose)."""

    def __init__(self, config: UIConfig, open_browser: bool) -> None:
        self.ui = config
        self.open_browser = open_browser
        super().__init__(create_app(config.store, token=config.token), config.host, config.port)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        port = self.servers[0].sockets[0].getsockname()[1] if self.servers else self.ui.port
        address = self.ui.address(port)
        print(f"pyrula ui: {address} (store {self.app.state.store_path}; Ctrl-C stops)", flush=True)
        if self.open_browser and not os.environ.get("CI"):
            webbrowser.open(address)


def serve(config: UIConfig, *, open_browser: bool = False) -> None:
    """Serve the page until Ctrl-C."""
    _Server(config, open_browser).run()
