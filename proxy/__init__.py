"""The record/replay HTTP proxy (`pyrula proxy`): record and replay for any client, any language.

An h11 + anyio server that sits between an HTTP client and the model providers. It fingerprints
each request with the in-process transports' canonicalizers and keys it the way a cassette does,
so an exchange recorded through the proxy replays in-process, and the reverse.
"""

from .config import MODES, Limits, Mode, ProxyConfig, parse_listen
from .errors import ConfigError, ProxyError
from .routes import DEFAULT_ROUTES, Route, parse_route
from .server import ProxyServer, run
from .thread import BackgroundProxy, background

__all__ = [
    "DEFAULT_ROUTES",
    "MODES",
    "BackgroundProxy",
    "ConfigError",
    "Limits",
    "Mode",
    "ProxyConfig",
    "ProxyError",
    "ProxyServer",
    "Route",
    "background",
    "parse_listen",
    "parse_route",
    "run",
]
