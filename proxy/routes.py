"""Where a request goes: one table of path prefixes, each naming a provider's base URL.

A client points its base URL at `http://127.0.0.1:PORT/<provider>` and changes nothing else; the
proxy strips the prefix and appends the rest of the path and query to the provider's base URL.
With `--upstream URL` every path not claimed by a `--route` goes to that one URL, unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from .errors import ConfigError

UPSTREAM = "upstream"  # the provider name of the `--upstream` catch-all
CONTROL_PREFIX = b"/_pyrula/"  # the proxy's own endpoints; never forwarded

_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")


@dataclass(frozen=True, slots=True)
class Route:
    """Requests under `/<name>/` go to `upstream` (a base URL: scheme, host, optional path)."""

    name: str
    upstream: str


# The providers a client reaches with no configuration. `--route NAME=URL` adds or replaces one.
# A client's base URL is the proxy's `/<name>` plus what it would append to the provider's host
# (`/openai/v1`, `/groq/v1`: the `/openai` of Groq's own base URL is in its row).
DEFAULT_ROUTES: tuple[Route, ...] = (
    Route("openai", "https://api.openai.com"),
    Route("anthropic", "https://api.anthropic.com"),
    Route("gemini", "https://generativelanguage.googleapis.com"),
    # OpenAI-compatible providers (pyrula.fingerprints.openai_compatible).
    Route("mistral", "https://api.mistral.ai"),
    Route("groq", "https://api.groq.com/openai"),
    Route("xai", "https://api.x.ai"),
    Route("deepseek", "https://api.deepseek.com"),
    Route("openrouter", "https://openrouter.ai/api"),
    Route("together", "https://api.together.xyz"),
    # Local model servers at their default ports; `--route vllm=http://HOST:PORT` moves one.
    Route("ollama", "http://localhost:11434"),
    Route("vllm", "http://localhost:8000"),
)


@dataclass(frozen=True, slots=True)
class Target:
    """A resolved request: which route took it and the full upstream URL it stands for."""

    provider: str
    url: str
    path: str  # the upstream path, for log lines


def parse_route(spec: str) -> Route:
    """`NAME=URL` (as given to `--route`) as a `Route`."""
    name, sep, url = spec.partition("=")
    if not sep:
        raise ConfigError(
            f"--route {spec!r} is not NAME=URL; e.g. --route mistral=https://api.mistral.ai"
        )
    return Route(check_name(name.strip()), check_base_url(url.strip(), f"--route {name}"))


def check_name(name: str) -> str:
    if not _NAME.match(name) or name == UPSTREAM or name.startswith("_"):
        raise ConfigError(
            f"route name {name!r} must be lower-case letters, digits, '.', '_' or '-' "
            f"(and not {UPSTREAM!r}); it becomes the path prefix /{name}/"
        )
    return name


def check_base_url(url: str, what: str) -> str:
    """A base URL the proxy can forward to: http(s), a host, no query or fragment."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"{what}: {url!r} is not a URL ({exc})") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{what}: {url!r} needs http:// or https:// and a host")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ConfigError(f"{what}: {url!r} must not carry a query, fragment or credentials")
    netloc = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    if port is not None:
        netloc = f"{netloc}:{port}"
    return f"{parts.scheme}://{netloc}{parts.path.rstrip('/')}"


class RouteTable:
    """Resolves request targets; longest prefix first, then the catch-all upstream if any."""

    def __init__(self, routes: Iterable[Route], upstream: str | None = None) -> None:
        table: dict[str, Route] = {}
        for route in routes:
            table[route.name] = route  # a later route of the same name replaces the earlier one
        self.routes: tuple[Route, ...] = tuple(table.values())
        self.upstream = upstream
        self._prefixes = sorted(
            ((b"/" + r.name.encode(), r) for r in self.routes), key=lambda p: -len(p[0])
        )

    def resolve(self, target: bytes) -> Target | None:
        """Where `target` (the request line's origin-form path and query) goes, or None."""
        path = target.split(b"?", 1)[0]
        for prefix, route in self._prefixes:
            if path == prefix or path.startswith(prefix + b"/"):
                return _join(route.name, route.upstream, target[len(prefix) :])
        if self.upstream is not None:
            return _join(UPSTREAM, self.upstream, target)
        return None

    def describe(self) -> list[tuple[str, str]]:
        """(prefix, upstream) pairs for the banner and the health endpoint."""
        rows = [(f"/{r.name}/", r.upstream) for r in self.routes]
        if self.upstream is not None:
            rows.append(("/*", self.upstream))
        return rows


def _join(provider: str, base: str, rest: bytes) -> Target:
    # The base URL fixes scheme and host; the client only ever supplies what follows them.
    text = rest.decode("latin-1")
    if not text.startswith("/"):
        text = "/" + text
    return Target(provider=provider, url=base + text, path=base_path(base) + text.split("?")[0])


def base_path(base: str) -> str:
    return urlsplit(base).path
