"""The proxy's settings: modes, where it listens, where it forwards, and its limits."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

from pyrula.cassette import Mode as CassetteMode
from pyrula.journal.store import is_url

from .errors import ConfigError
from .routes import DEFAULT_ROUTES, Route, RouteTable, check_base_url

Mode = Literal["record", "replay", "auto", "passthrough"]
MODES: tuple[str, ...] = get_args(Mode)

# What each proxy mode asks of the journal: the cassette mode it plans with, or None for no journal.
CASSETTE_MODES: dict[str, CassetteMode | None] = {
    "record": "all",  # every request goes upstream and is (re)recorded; nothing is ever deleted
    "replay": "none",  # answered from the store only; never connects upstream
    "auto": "new_episodes",  # replay what is recorded, record the rest
    "passthrough": None,  # forward without journaling
}

MODE_HELP: dict[str, str] = {
    "record": "forwards every request and records each reply",
    "replay": "answers from the store only and never connects upstream",
    "auto": "replays what is recorded and records the rest",
    "passthrough": "forwards without recording",
}

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8787
DEFAULT_CASSETTE = "proxy"
TOKEN_ENV = "PYRULA_PROXY_TOKEN"
_MIN_TOKEN_CHARS = 16


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on what a client may send and how long anything may take."""

    max_body_bytes: int = 32 << 20  # provider request caps are about this size (inline images)
    max_header_bytes: int = 64 << 10  # request line plus headers
    spool_bytes: int = 64 << 10  # a request body past this goes to a temporary file as it arrives
    # Spooled request bodies held in memory at once (each loaded whole to be fingerprinted);
    # more wait on disk. Bounds the memory large uploads can take, whatever their number.
    max_buffered_bytes: int = 64 << 20
    head_timeout_s: float = 10.0  # to receive a request's head (a new connection: from accept)
    request_timeout_s: float = 60.0  # to receive a request's body once its head arrived
    idle_timeout_s: float = 120.0  # a keep-alive connection with no request in flight
    upstream_connect_timeout_s: float = 15.0
    upstream_read_timeout_s: float = 600.0  # between two chunks of a reply (models think slowly)
    grace_s: float = 10.0  # at shutdown, how long in-flight exchanges may take to finish
    max_connections: int = 1024  # connections serving requests; more wait in the backlog
    # Connections whose first request head has not arrived (or not passed the token check) yet,
    # counted apart: past this, the oldest of them is closed, so clients that never finish a
    # head cannot hold the slots of those that do.
    max_pending_connections: int = 128

    def __post_init__(self) -> None:
        for name in (
            "max_body_bytes",
            "max_header_bytes",
            "max_connections",
            "max_pending_connections",
            "spool_bytes",
            "max_buffered_bytes",
        ):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive")


@dataclass(frozen=True, slots=True)
class ProxyConfig:
    """Everything `pyrula proxy` takes. Unsafe or contradictory settings raise `ConfigError`."""

    store: Path | str  # a str is turned into a Path, unless it is a postgresql:// URL
    mode: Mode = "replay"
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    routes: tuple[Route, ...] = ()  # added to (or replacing) the default provider routes
    upstream: str | None = None
    cassette: str = DEFAULT_CASSETTE
    token: str | None = None
    allow_remote: bool = False
    upstream_ca: Path | None = None
    limits: Limits = field(default_factory=Limits)
    # A replayed stream keeps its recorded frames; `recorded` also keeps the pace they came at.
    replay_timing: str = "fast"
    # The start-up banner lists every route with its URL, not only those given (`--verbose`).
    verbose: bool = False

    def __post_init__(self) -> None:
        if not is_url(self.store):
            object.__setattr__(self, "store", Path(self.store))
        if self.replay_timing not in ("fast", "recorded"):
            raise ConfigError(
                f"--replay-timing {self.replay_timing!r}: use fast (frames as fast as the client "
                "reads them) or recorded (at the pace they were recorded)"
            )
        if self.mode not in MODES:
            raise ConfigError(f"unknown mode {self.mode!r}; use one of {', '.join(MODES)}")
        if not valid_cassette(self.cassette):
            raise ConfigError(f"--cassette {self.cassette!r}: {CASSETTE_RULE}")
        if self.upstream is not None:
            object.__setattr__(self, "upstream", check_base_url(self.upstream, "--upstream"))
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"port {self.port} is out of range 0-65535")
        if not is_loopback(self.host):
            if not self.allow_remote:
                raise ConfigError(
                    f"--listen {self.host} is not a loopback address: anyone who reaches it could "
                    "use your provider keys or read your recordings. Add --allow-remote and a "
                    f"token (--token or ${TOKEN_ENV}) if that is what you want"
                )
            if not self.token:
                raise ConfigError(
                    f"listening on {self.host} needs a bearer token: pass --token or set "
                    f"${TOKEN_ENV}; clients send it as 'Proxy-Authorization: Bearer <token>'"
                )
        if self.token is not None and len(self.token) < _MIN_TOKEN_CHARS:
            raise ConfigError(
                f"the proxy token must be at least {_MIN_TOKEN_CHARS} characters; "
                'generate one with: python -c "import secrets; print(secrets.token_urlsafe())"'
            )

    @property
    def cassette_mode(self) -> CassetteMode | None:
        return CASSETTE_MODES[self.mode]

    @property
    def journaled(self) -> bool:
        return self.cassette_mode is not None

    @property
    def offline(self) -> bool:
        """Replay mode: no upstream client is ever built."""
        return self.mode == "replay"

    def route_table(self) -> RouteTable:
        # With a catch-all upstream the default provider prefixes would shadow its real paths
        # (a provider may well serve /openai/...): only the routes given explicitly apply.
        defaults = DEFAULT_ROUTES if self.upstream is None else ()
        return RouteTable((*defaults, *self.routes), self.upstream)


CASSETTE_RULE = "a cassette name is 1-200 printable characters"


def valid_cassette(name: str) -> bool:
    return 0 < len(name) <= 200 and name.isprintable()


def parse_listen(text: str) -> tuple[str, int]:
    """`HOST:PORT`, `[V6]:PORT`, `:PORT` or `PORT` as (host, port)."""
    text = text.strip()
    host, port_text = DEFAULT_HOST, text
    if text.startswith("["):
        end = text.find("]")
        if end == -1 or not text[end + 1 :].startswith(":"):
            raise ConfigError(f"--listen {text!r}: write an IPv6 address as [::1]:PORT")
        host, port_text = text[1:end], text[end + 2 :]
    elif ":" in text:
        head, _, port_text = text.rpartition(":")
        host = head or DEFAULT_HOST
    try:
        port = int(port_text)
    except ValueError as exc:
        raise ConfigError(f"--listen {text!r} is not HOST:PORT (e.g. 127.0.0.1:8787)") from exc
    if not 0 <= port <= 65535:
        raise ConfigError(f"--listen {text!r}: port {port} is out of range 0-65535")
    return host, port


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
