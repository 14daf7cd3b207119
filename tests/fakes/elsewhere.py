"""Recording in another process: requests recorded there are new to the test's process, as in
a suite replaying what an earlier run recorded (nothing of them is in this process's caches)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

# Records each request of a JSON spec through a raw httpx client into a cassette; the stand-in
# provider's reply to the n-th request is reply n (a JSON body, or SSE events when a list).
_RECORDER = """
import json, sys, httpx, pyrula
spec = json.loads(sys.argv[1])
replies = iter(spec["replies"])
def provider(request):
    reply = next(replies)
    if isinstance(reply, list):
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              content="".join(reply).encode())
    return httpx.Response(200, json=reply)
client = httpx.Client(transport=pyrula.HttpxTransport(httpx.MockTransport(provider)))
with pyrula.cassette(spec["cassette"], mode="all", store=spec["store"], path=spec["path"]):
    for url, headers, body in spec["requests"]:
        client.post(url, headers=headers, content=body.encode())
"""

Request = tuple[str, dict[str, str], bytes]


def record_elsewhere(
    store: str,
    requests: list[Request],
    replies: list[Any],
    cassette: str = "sent",
    path: str | None = None,
) -> None:
    """Record `requests` (url, headers, UTF-8 body) into `cassette` of `store` (a text cassette
    at `path`, the store its cache, when given) from a child process, the stand-in provider
    answering the n-th with `replies[n]`."""
    spec = {
        "store": store,
        "cassette": cassette,
        "path": path,
        "requests": [(url, headers, body.decode()) for url, headers, body in requests],
        "replies": replies,
    }
    subprocess.run([sys.executable, "-c", _RECORDER, json.dumps(spec)], check=True, timeout=120)
