"""The ASGI app: one store, its routes, the templates and the vendored htmx."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from pyrula.inspection.by_time import TimeOrder
from pyrula.journal.exchanges import Exchanges
from pyrula.journal.store import Store, shown
from pyrula.runtime import RunStore
from pyrula.ui import exchanges, live, runs
from pyrula.ui.access import TokenGate

HERE = Path(__file__).parent


def _home(_request: object) -> Response:
    return RedirectResponse("/exchanges", status_code=307)


def create_app(store: Path | str | None = None, *, token: str | None = None) -> Starlette:
    """The page over the store at `store` (default: PYRULA_STORE or ./.pyrula), which must exist:
    nothing is created. With `token`, every request must carry it (see `pyrula.ui.access`)."""
    opened = Store(Path(store) if store is not None else None, create=False)

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            live.end_streams(app)
            opened.close()

    app = Starlette(
        routes=[
            Route("/", _home),
            *exchanges.routes,
            *runs.routes,
            *live.routes,
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ],
        middleware=[Middleware(TokenGate, token=token)],
        lifespan=lifespan,
    )
    app.state.store = opened
    app.state.store_path = shown(opened.location)
    app.state.exchanges = Exchanges(opened)
    app.state.order = TimeOrder(app.state.exchanges)  # the exchange list, newest first
    app.state.closing = threading.Event()  # set: the live streams end (`live.end_streams`)
    app.state.live_streams = 0  # how many are open
    app.state.runs = RunStore(opened)
    return app
