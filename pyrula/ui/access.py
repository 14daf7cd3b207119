"""Who may use the page: anyone on loopback; off loopback, only a request carrying the token.

The proxy's rule: listening beyond 127.0.0.1/::1 needs a token. A browser presents it once as
`?token=...` (the page then sets a cookie) or on every request as `Authorization: Bearer ...`.
A state-changing request (POST) from another site's page is refused whatever the address, so a
page on the web cannot press the buttons of a UI on localhost.
"""

from __future__ import annotations

import hmac
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

COOKIE = "pyrula_ui_token"


class TokenGate:
    """ASGI middleware: with a token set, every request must carry it."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        refusal = self._refusal(request)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        presented = request.query_params.get("token")
        if self.token is not None and presented is not None and self._valid(presented):
            # Trade the token in the address for a cookie, and drop it from the address bar.
            url = request.url.remove_query_params("token")
            response = RedirectResponse(str(url), status_code=303)
            response.set_cookie(COOKIE, self.token, httponly=True, samesite="strict")
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _valid(self, presented: str | None) -> bool:
        if not presented or self.token is None:
            return False
        return hmac.compare_digest(presented.encode(), self.token.encode())

    def _refusal(self, request: Request) -> Response | None:
        if request.method not in ("GET", "HEAD") and not _same_origin(request):
            return PlainTextResponse(
                "pyrula ui: refused a change sent from another site's page", status_code=403
            )
        if self.token is None:
            return None
        bearer = request.headers.get("authorization", "")
        candidates = [
            bearer.removeprefix("Bearer ").strip() if bearer.startswith("Bearer ") else None,
            request.cookies.get(COOKIE),
            request.query_params.get("token"),
        ]
        if any(self._valid(c) for c in candidates):
            return None
        return PlainTextResponse(
            "pyrula ui: this page needs its token; open the address `pyrula ui` printed "
            "(it ends in ?token=...) or send 'Authorization: Bearer <token>'",
            status_code=401,
        )


def _same_origin(request: Request) -> bool:
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    return urlsplit(origin).netloc == request.headers.get("host", "")
