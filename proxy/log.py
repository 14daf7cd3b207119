"""What the proxy prints: a startup banner, then one line per exchange."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

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
    rows = routes.describe()
    width = max((len(prefix) for prefix, _ in rows), default=0)
    lines = [
        f"pyrula proxy listening on {url}",
        f"  mode      {config.mode}: {MODE_HELP[config.mode]}",
        (
            f"  store     {Path(config.store).resolve()}"
            if config.journaled
            else "  store     (not used)"
        ),
    ]
    if config.journaled:
        lines.append(f"  cassette  {config.cassette} (per request: x-pyrula-cassette header)")
    lines.append(
        "  routes    " + (f"{url}{rows[0][0]:<{width}} -> {rows[0][1]}" if rows else "none")
    )
    lines += [f"            {url}{prefix:<{width}} -> {target}" for prefix, target in rows[1:]]
    if config.token:
        lines.append("  auth      bearer token required (Proxy-Authorization or X-Pyrula-Token)")
    lines.append(
        f"  stop      Ctrl-C (in-flight exchanges get {config.limits.grace_s:g}s to finish)"
    )
    return "\n".join(lines)
