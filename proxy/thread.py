"""Running a proxy on a background thread of this process (test fixtures, benchmarks)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager

import anyio.from_thread

from .config import ProxyConfig
from .server import ProxyServer


class BackgroundProxy:
    """A proxy serving on its own event-loop thread; `stop()` shuts it down gracefully."""

    def __init__(
        self, portal: anyio.from_thread.BlockingPortal, server: ProxyServer, done: Future[None]
    ) -> None:
        self._portal = portal
        self.server = server
        self._done = done

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def port(self) -> int:
        return self.server.port

    def base_url(self, provider: str = "") -> str:
        """The base URL a client uses for `provider` (`openai` -> http://127.0.0.1:PORT/openai)."""
        return f"{self.url}/{provider}" if provider else self.url

    def stop(self, *, cut: bool = False, timeout: float | None = None) -> None:
        if self._done.done():
            self._done.result()
            return
        self._portal.call(self.server.cut if cut else self.server.shutdown)
        wait = timeout if timeout is not None else self.server.config.limits.grace_s + 10
        self._done.result(timeout=wait)


@contextmanager
def background(config: ProxyConfig) -> Iterator[BackgroundProxy]:
    """Serve `config` on a background thread for the duration of the block."""
    with anyio.from_thread.start_blocking_portal() as portal:
        done, server = portal.start_task(ProxyServer(config).serve)
        proxy = BackgroundProxy(portal, server, done)
        try:
            yield proxy
        finally:
            proxy.stop()
