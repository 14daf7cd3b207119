"""A store reader for the corruption suite, run in its own process so that a crash is seen as one.

`python -m tests.journal._damage write STORE` fills a store and prints what it wrote (JSON);
`python -m tests.journal._damage read STORE EXPECTED` reads every record back and prints one JSON
line: how many records came back exactly as written, how many came back different (must be none),
how many were not found, and the class of every error raised (each must be a `StoreError`).
`python -m tests.journal._damage cut STORE EXPECTED LENGTH` opens the store, reads it all once,
then cuts its `data.mdb` to LENGTH bytes under the open store and reads (and writes) again.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import sys
from typing import Any

from pyrula.errors import StoreError
from pyrula.journal import Exchange, Exchanges, Store


def _request(index: int) -> dict[str, Any]:
    history = [{"role": "user", "content": f"question {n} " + "words " * 40} for n in range(index)]
    return {"surface": "generic", "compared": {"messages": history, "n": index}, "meta": {}}


def write(path: str) -> None:
    rng = random.Random(7)
    expected = {}
    with Store(path) as store:
        exchanges = Exchanges(store)
        for index in range(6):
            # Record 0 spans several frame pages; the others fit in page 0.
            size = 150_000 if index == 0 else 2_000
            frames = [rng.randbytes(1000) for _ in range(size // 1000)]
            key = f"case-{index}".encode()
            exchanges.put(key, _exchange(key, frames, index))
            expected[key.decode()] = base64.b64encode(b"".join(frames)).decode()
    print(json.dumps(expected))


def _exchange(key: bytes, frames: list[bytes], index: int = 0) -> Exchange:
    return Exchange(
        request_doc=_request(index),
        surface="generic",
        fingerprint=hashlib.sha256(key).hexdigest(),
        method="POST",
        url="http://x.test/",
        status=200,
        headers=[("content-type", "application/octet-stream")],
        frames=frames,
        streamed=False,
        elapsed_ms=1.0,
    )


def read(path: str, expected_path: str, cut: int | None = None) -> None:
    with open(expected_path) as handle:
        expected: dict[str, str] = json.load(handle)
    outcome: dict[str, Any] = {"exact": 0, "wrong": [], "missing": 0, "errors": []}

    def typed(exc: BaseException) -> None:
        kind = "typed" if isinstance(exc, StoreError) else "UNTYPED"
        outcome["errors"].append(f"{kind} {type(exc).__name__}: {exc}")

    try:
        store = Store(path, create=False)
    except BaseException as exc:
        typed(exc)
        print(json.dumps(outcome))
        return
    exchanges = Exchanges(store)
    if cut is not None:  # every page mapped and read once, then the file is cut under it
        for key, _record in exchanges.scan():
            found = exchanges.get(key)
            assert found is not None
            exchanges.body(*found)
        os.truncate(os.path.join(path, "data.mdb"), cut)
        try:
            exchanges.put(b"after-cut", _exchange(b"after-cut", [b"x" * 100]))
        except BaseException as exc:
            typed(exc)
    try:
        list(exchanges.scan())
    except BaseException as exc:
        typed(exc)
    for name, body in expected.items():
        index = int(name.rsplit("-", 1)[1])
        try:
            found = exchanges.get(name.encode())
            if found is None:
                outcome["missing"] += 1
                continue
            record, first = found
            served = exchanges.body(record, first)
            request = exchanges.request(record)
            if (
                served == base64.b64decode(body)
                and request == _request(index)
                and (
                    record.status == 200
                    and record.headers == [("content-type", "application/octet-stream")]
                )
            ):
                outcome["exact"] += 1
            else:
                outcome["wrong"].append(name)
        except BaseException as exc:
            typed(exc)
    store.close()
    print(json.dumps(outcome))


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2])
    elif sys.argv[1] == "cut":
        read(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        read(sys.argv[2], sys.argv[3])
