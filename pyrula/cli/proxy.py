"""`pyrula proxy`: the record/replay HTTP proxy, for any client in any language."""

from __future__ import annotations

import logging
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from pyrula.cli._options import HostOption, PortOption, listen_at
from pyrula.errors import PyrulaError
from pyrula.journal.store import default_path

_DEFAULT_LISTEN = "127.0.0.1:8787"


class ProxyMode(StrEnum):
    record = "record"
    replay = "replay"
    auto = "auto"
    passthrough = "passthrough"


def proxy(
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            envvar="PYRULA_STORE",
            show_default=False,
            help="Store folder to record into / replay from (default: ./.pyrula).",
        ),
    ] = None,
    mode: Annotated[
        ProxyMode,
        typer.Option(
            "--mode",
            help="record: forward and record everything; replay: answer from the store only, "
            "never connect upstream; auto: replay what is recorded, record the rest; "
            "passthrough: forward without recording.",
        ),
    ] = ProxyMode.replay,
    listen: Annotated[
        str | None,
        typer.Option(
            "--listen",
            metavar="HOST:PORT",
            show_default=False,
            help="Where to listen (default 127.0.0.1:8787; port 0: any free port).",
        ),
    ] = None,
    host: HostOption = None,
    port: PortOption = None,
    upstream: Annotated[
        str | None,
        typer.Option(
            "--upstream",
            help="Send every request (not under a --route prefix) to this base URL instead of "
            "routing /openai/, /anthropic/, /gemini/ to the providers.",
            show_default=False,
        ),
    ] = None,
    route: Annotated[
        list[str] | None,
        typer.Option(
            "--route",
            metavar="NAME=URL",
            help="Add or replace a route: requests under /NAME/ go to URL (repeatable).",
            show_default=False,
        ),
    ] = None,
    cassette: Annotated[
        str,
        typer.Option(
            "--cassette",
            help="Cassette namespace to record into and replay from; a request may pick another "
            "with the x-pyrula-cassette header.",
        ),
    ] = "proxy",
    allow_remote: Annotated[
        bool,
        typer.Option(
            "--allow-remote", help="Allow a non-loopback --listen address (needs --token)."
        ),
    ] = False,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="PYRULA_PROXY_TOKEN",
            show_default=False,
            help="Bearer token clients must send (Proxy-Authorization: Bearer <token>). "
            "Prefer the PYRULA_PROXY_TOKEN variable: options show up in process listings.",
        ),
    ] = None,
    upstream_ca: Annotated[
        Path | None,
        typer.Option(
            "--upstream-ca",
            help="CA bundle to trust for HTTPS upstreams, instead of the default one.",
            show_default=False,
        ),
    ] = None,
    max_body_bytes: Annotated[
        int, typer.Option("--max-body-bytes", min=1, help="Largest request body accepted.")
    ] = 32 << 20,
    max_header_bytes: Annotated[
        int, typer.Option("--max-header-bytes", min=1024, help="Largest request head accepted.")
    ] = 64 << 10,
    spool_bytes: Annotated[
        int,
        typer.Option(
            "--spool-bytes", min=1, help="A request body past this is spooled to a temporary file."
        ),
    ] = 64 << 10,
    max_buffered_bytes: Annotated[
        int,
        typer.Option(
            "--max-buffered-bytes",
            min=1,
            help="Spooled request bodies held in memory at once; more wait on disk.",
        ),
    ] = 64 << 20,
    head_timeout: Annotated[
        float,
        typer.Option(
            "--head-timeout",
            min=0.01,
            help="Seconds a request's head may take to arrive (a new connection's: from accept).",
        ),
    ] = 10.0,
    max_pending: Annotated[
        int,
        typer.Option(
            "--max-pending-connections",
            min=1,
            help="Connections whose first request head has not arrived yet; past it, the "
            "oldest is closed.",
        ),
    ] = 128,
    grace: Annotated[
        float,
        typer.Option(
            "--grace", min=0, help="Seconds in-flight exchanges get to finish at shutdown."
        ),
    ] = 10.0,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No line per exchange (warnings still show).")
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            help="At start, list every route with its upstream URL, not only the ones given.",
        ),
    ] = False,
    replay_timing: Annotated[
        str,
        typer.Option(
            "--replay-timing",
            help="A replayed stream's frames: fast (as fast as the client reads) or recorded "
            "(at the pace they were recorded).",
        ),
    ] = "fast",
) -> None:
    """Run the record/replay HTTP proxy; clients change only their base URL.

    Example: pyrula proxy --mode auto --listen 127.0.0.1:8787, then
    OPENAI_BASE_URL=http://127.0.0.1:8787/openai/v1
    """
    import anyio

    from pyrula.proxy import Limits, ProxyConfig, parse_listen, parse_route, run

    _configure_logging(quiet)
    try:
        host, port = listen_at(listen, host, port, default=_DEFAULT_LISTEN, parse=parse_listen)
        config = ProxyConfig(
            store=store if store is not None else default_path(),
            mode=mode.value,  # type: ignore[arg-type]
            host=host,
            port=port,
            routes=tuple(parse_route(spec) for spec in route or ()),
            upstream=upstream,
            cassette=cassette,
            token=token,
            allow_remote=allow_remote,
            upstream_ca=upstream_ca,
            limits=Limits(
                max_body_bytes=max_body_bytes,
                max_header_bytes=max_header_bytes,
                grace_s=grace,
                head_timeout_s=head_timeout,
                max_pending_connections=max_pending,
                spool_bytes=spool_bytes,
                max_buffered_bytes=max_buffered_bytes,
            ),
            replay_timing=replay_timing,
            verbose=verbose,
        )
        anyio.run(run, config)
    except PyrulaError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc


def _configure_logging(quiet: bool) -> None:
    logger = logging.getLogger("pyrula.proxy")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", datefmt="%H:%M:%S"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logging.getLogger("pyrula.proxy.exchanges").setLevel(logging.WARNING if quiet else logging.INFO)
