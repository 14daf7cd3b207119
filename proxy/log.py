"""What the proxy prints: a startup banner, then one line per exchange."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pyrula.journal.store import shown

from .config import MODE_HELP, ProxyConfig
from .routes import RouteTable

logger = logging.getLogger("pyrula.proxy")  # the banner, shutdown and problems
exchange_logger = logging.getLogger("pyrula.proxy.exchanges")  # one line per exchange

# How an exchange ended, as the log line's first word.
HIT = "hit"  # replayed from the store
MISS = "miss"  # replay mode had no recording: answered 409
RECORDED = "recorded"  # went upstream and the whole reply was committed
LIVE = "live"  # went upstream, nothing to record (passthrough)
UNRECORDED = "unrecorded"  # went upstream but the reply was not whole or could not be stored
ABANDONED = "abandoned"  # the client hung up (or shutdown cut it) before the reply was whole
REFUSED = "refused"  # the proxy answered an error itself (auth, route, limits)
FAILED = "failed"  # the upstream could not be reached
CONTROL = "control"  # the proxy's own endpoints


@dataclass(slots=True)
class Outcome:
    """One exchange, for its log line."""

    kind: str
    status: int
    method: str
    path: str
    provider: str = "-"
    namespace: str = ""
    ms: float = 0.0
    detail: str = ""


NOT_RECORDED_HEADER = "x-pyrula-not-recorded"


class RecordingHealth:
    """Whether the store is failing to take recordings (a full disk, damage), for the proxy.

    The first failure of a kind logs one warning, not one per exchange; while the condition
    lasts, every live reply's head carries `x-pyrula-not-recorded` saying why. The proxy still
    tries each commit, and the first that succeeds ends the condition (logged once too).
    """

    def __init__(self) -> None:
        self.problem: str | None = None

    def failed(self, exc: Exception) -> None:
        kind = type(exc).__name__
        if self.problem is None or not self.problem.startswith(kind):
            logger.warning(
                "pyrula proxy: exchanges are not being recorded: %s (the proxy keeps answering; "
                "replies carry the %s header until a recording succeeds again)",
                exc,
                NOT_RECORDED_HEADER,
            )
        self.problem = f"{kind}: {' '.join(str(exc).split())}"

    def recovered(self) -> None:
        if self.problem is not None:
            logger.warning("pyrula proxy: recording again (%s has cleared)", self.problem)
            self.problem = None

    def header(self) -> list[tuple[bytes, bytes]]:
        """The header for a live reply's head while recordings are failing (else none)."""
        if self.problem is None:
            return []
        value = self.problem.encode("ascii", "replace")[:400]
        return [(NOT_RECORDED_HEADER.encode(), value)]


def exchange_line(o: Outcome) -> str:
    line = f"{o.kind:<10} {o.provider:<10} {o.method} {o.path} {o.status} {o.ms:.1f} ms"
    if o.namespace:
        line += f" [{o.namespace}]"
    if o.detail:
        line += f" - {o.detail}"
    return line


def log_exchange(outcome: Outcome) -> None:
    level = logging.WARNING if outcome.kind in (MISS, FAILED, UNRECORDED) else logging.INFO
    if exchange_logger.isEnabledFor(level):
        exchange_logger.log(level, exchange_line(outcome))


def banner(config: ProxyConfig, url: str, routes: RouteTable) -> str:
    first, *more = route_lines(config, url, routes)
    lines = [
        f"pyrula proxy listening on {url}",
        f"  mode      {config.mode}: {MODE_HELP[config.mode]}",
        (f"  store     {shown(config.store)}" if config.journaled else "  store     (not used)"),
    ]
    if config.journaled:
        lines.append(f"  cassette  {config.cassette} (per request: x-pyrula-cassette header)")
    lines.append(f"  routes    {first}")
    lines += [f"            {line}" for line in more]
    if config.token:
        lines.append("  auth      bearer token required (Proxy-Authorization or X-Pyrula-Token)")
    lines.append(
        f"  stop      Ctrl-C (in-flight exchanges get {config.limits.grace_s:g}s to finish)"
    )
    return "\n".join(lines)


def route_lines(config: ProxyConfig, url: str, routes: RouteTable) -> list[str]:
    """The banner's routes: one line each for those given (`--route`, `--upstream`), then one
    line naming the built-in ones; with `--verbose`, every route with its upstream URL."""
    rows = routes.describe()
    given = {f"/{route.name}/" for route in config.routes} | {"/*"}
    listed = rows if config.verbose else [row for row in rows if row[0] in given]
    rest = [row[0].strip("/") for row in rows if row not in listed]
    width = max((len(prefix) for prefix, _ in listed), default=0)
    lines = [f"{url}{prefix:<{width}} -> {target}" for prefix, target in listed]
    if rest:
        also = "built in: " if lines else ""
        lines.append(f"{also}{url}/<name>/ for {', '.join(rest)} (--verbose: their upstreams)")
    return lines or ["none"]
