"""Text cassettes: a cassette kept as one readable file in the repository, the store its cache.

A file holds one cassette, deterministic (keys sorted, exchanges in key order, two-space indent,
UTF-8, a final newline), so a re-recording shows as a diff a reviewer can read and two branches
that record different tests never touch the same file:

    {
      "exchanges": [
        {
          "elapsed_ms": 12.5,
          "extra": {"sent": "<64 hex digits>"},
          "fingerprint": "<64 hex digits>",
          "headers": [["content-type", "application/json"]],
          "method": "POST",
          "occurrence": 0,
          "recorded_at": 1764547200.0,
          "reply": {"json": {...}, "layout": "compact"},
          "request": {"compared": {...}, "meta": {...}, ...},
          "status": 200,
          "streamed": false,
          "surface": "openai.chat",
          "url": "https://api.openai.com/v1/chat/completions"
        }
      ],
      "pyrula_cassette": 1
    }

`request` is the scrubbed canonical request, exactly as the store keeps it; `extra.sent` the
digest of the request as it was sent (one-way, no credential in it), from which rebuilding the
cache writes the store's sent index (`sent_index.py`). `reply` is the body:
`{"json": ..., "layout": ...}` for a one-line JSON body that one of the layouts below writes back
byte for byte, `{"lines": [...]}` for other UTF-8 text, `{"frames": [...]}` for a stream (one SSE
frame per line; a frame that is not UTF-8 as `{"base64": ...}`), `{"base64": ...}` otherwise.

The store is the cache. Beside the SHA-256 of the file it was last filled from, it notes the
file's stat (size, mtime, ctime, inode) and when that stat was taken. Opening a cassette whose
file still has the noted stat, last changed well before it was noted, trusts the cache without
reading the file (git's index rule: a file written in the same timestamp tick as its check may have
changed unseen, so such a "racy" stat is never trusted). Otherwise the file is read and hashed;
only when the digest differs is it parsed and the cassette's records replaced. The file is written
atomically (a temporary file renamed over it), keeping verbatim each entry a re-recording made
again unchanged (`steady`). Both run under the cassettes' lock (`cassette_lock`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from pyrula.errors import CassetteFileError
from pyrula.journal import cassette_lock, file_ahead, steady
from pyrula.journal.blobs import request_ref
from pyrula.journal.exchanges import RECORD_FORMAT, ExchangeRecord, Exchanges, StoredExchange
from pyrula.journal.keys import cassette_key, namespace_prefix, split_key
from pyrula.journal.records import in_newest_format
from pyrula.journal.store import Store, Txn
from pyrula.journal.text import frame_bytes, frame_json

log = logging.getLogger("pyrula.journal")

FILE_FORMAT = 1
SUFFIX = ".json"
_META = b"cassette-file\x00"
_ABSENT = b"absent"  # the digest of "no file": the cassette is empty
# One-line JSON layouts a body is checked against, so it can be kept as readable JSON.
_LAYOUTS: dict[str, dict[str, Any]] = {
    "compact": {"separators": (",", ":"), "ensure_ascii": False},
    "compact-ascii": {"separators": (",", ":")},
    "spaced": {"ensure_ascii": False},
    "spaced-ascii": {},
}
_RECORD_FIELDS = (
    "elapsed_ms",
    "extra",
    "headers",
    "method",
    "recorded_at",
    "status",
    "streamed",
    "surface",
    "url",
)


# A stat is trusted only for a file last changed this long before the stat was taken: longer
# than the coarsest timestamp tick in use (2 s on FAT), so a change within the tick is seen.
RACY_NS = 3_000_000_000


def file_digest(data: bytes | None) -> bytes:
    return _ABSENT if data is None else hashlib.sha256(data).hexdigest().encode()


def file_stat(path: Path) -> tuple[int, int, int, int] | None:
    """What a change to the file changes: size, mtime, ctime, inode (None: no file)."""
    try:
        seen = os.stat(path)
    except FileNotFoundError:
        return None
    return (seen.st_size, seen.st_mtime_ns, seen.st_ctime_ns, seen.st_ino)


def _note(digest: bytes, stat: tuple[int, int, int, int] | None, taken_ns: int) -> bytes:
    """The meta value: the digest, then (for a file) its stat and when the stat was taken."""
    if stat is None:
        return digest
    return b" ".join([digest, *(str(n).encode() for n in (*stat, taken_ns))])


def _trusted(note: bytes | None, stat: tuple[int, int, int, int] | None) -> bool:
    """Whether `note` vouches for a file that now has `stat` without reading it."""
    if note is None:
        return False
    if stat is None:
        return note == _ABSENT
    fields = note.split(b" ")
    if len(fields) != 6:
        return False  # no stat noted (an older note, or an absent file then)
    try:
        noted = tuple(int(f) for f in fields[1:])
    except ValueError:
        return False
    return noted[:4] == stat and stat[1] + RACY_NS < noted[4]


def sync(store: Store, name: str, path: Path) -> bool:
    """Make the store's records of cassette `name` those of the file at `path` (none when it is
    missing), and its file hold what the cache took in without it (`file_ahead`); return
    whether the records had to be rebuilt (the file changed since the last time). Under the
    cassettes' lock (`cassette_lock`), as `save`."""
    with cassette_lock.held(store, path):
        return _sync(store, name, path)


def _sync(store: Store, name: str, path: Path) -> bool:
    with store.read() as txn:  # one look at the meta table for both notes
        note = txn.get(_META + name.encode(), db=store.meta_db)
        note = None if note is None else bytes(note)
        ahead = file_ahead.keys_ahead(txn, store.meta_db, name)
    if not ahead:
        return _follow(store, name, path, note)
    exchanges = Exchanges(store)
    recovered = _stored_now(exchanges, ahead)
    rebuilt = _follow(store, name, path, note)
    if rebuilt:  # the file changed too: it wins where it holds the same key
        held = {key for key, _ in exchanges.scan(namespace_prefix(name))}
        exchanges.restore([item for item in recovered if item.key not in held])
    _save(store, name, path)
    if recovered:
        log.warning(
            "cassette %s: wrote %d recording(s) a stopped process left out of its file into %s",
            name,
            len(recovered),
            path,
        )
    return rebuilt


def _follow(store: Store, name: str, path: Path, note: bytes | None) -> bool:
    """`sync`'s part for the file: rebuild the cassette's records from it if it changed since
    `note` (the meta value `_note` wrote)."""
    meta_key = _META + name.encode()
    taken_ns = time.time_ns()
    stat = file_stat(path)
    if _trusted(note, stat):
        return False
    try:
        data = path.read_bytes() if stat is not None else None
    except FileNotFoundError:
        data = stat = None  # removed since its stat
    digest = file_digest(data)
    if note is not None and note.split(b" ", 1)[0] == digest:
        if stat is not None and stat[1] + RACY_NS < taken_ns:
            store.put_meta(meta_key, _note(digest, stat, taken_ns))  # trusted from now on
        return False
    stored = parse(data, name, path) if data is not None else []
    exchanges = Exchanges(store)
    exchanges.delete(key for key, _ in exchanges.scan(namespace_prefix(name)))
    if stored:
        exchanges.restore(stored)
    store.put_meta(meta_key, _note(digest, stat, taken_ns))
    return True


def save(store: Store, name: str, path: Path) -> None:
    """Write cassette `name`'s records to `path` atomically (delete the file when there are
    none), and note its digest so the next open finds the cache current. A recording whose
    reply is the one the file already holds for its key (`steady.key`) keeps the file's entry, and
    the cache takes it back, so a re-recording that changed nothing leaves the file as it was.
    Under the cassettes' lock (`cassette_lock`): another process's save waits, then reads the
    records this one wrote and the ones it made meanwhile."""
    with cassette_lock.held(store, path):
        _save(store, name, path)


def _save(store: Store, name: str, path: Path) -> None:
    exchanges = Exchanges(store)
    keys = [key for key, _ in exchanges.scan(namespace_prefix(name))]
    entries = [
        _entry(item.key, item.record, item.request, item.frames)
        for item in _stored_now(exchanges, keys)
    ]
    if not entries:
        path.unlink(missing_ok=True)
        _noted(store, name, _ABSENT, keys)
        return
    kept = _keep_steady(entries, path, name)
    if kept:
        exchanges.restore(kept)
    data = dumps({"pyrula_cassette": FILE_FORMAT, "exchanges": entries}).encode("utf-8")
    _write_atomically(path, data)
    _noted(store, name, _note(file_digest(data), file_stat(path), time.time_ns()), keys)


def _noted(store: Store, name: str, note: bytes, keys: list[bytes]) -> None:
    """After the file was written from the cache: it holds the recordings under `keys`, which
    are no longer ahead of it (one another process committed since stays noted)."""

    def write(txn: Txn) -> None:
        txn.put(_META + name.encode(), note, db=store.meta_db)
        file_ahead.clear(txn, store.meta_db, name, set(keys), store.exchanges_db)

    store.write(write)


def _keep_steady(entries: list[dict[str, Any]], path: Path, name: str) -> list[StoredExchange]:
    """Put back in `entries` each entry of the file at `path` that differs from the new one
    under its key only in when it was made (`steady.key`); return those, as records, for the
    cache to take back (none when there is no readable file)."""
    try:
        document = json.loads(path.read_bytes())
        old = {(e["fingerprint"], e["occurrence"]): e for e in document["exchanges"]}
    except (OSError, ValueError, RecursionError, TypeError, KeyError):
        return []  # no file, or one to be replaced whole
    kept = []
    for index, entry in enumerate(entries):
        found = old.get((entry["fingerprint"], entry["occurrence"]))
        if found is None or found == entry or steady.key(found) != steady.key(entry):
            continue
        try:
            kept.append(_stored(found, name))
        except (ValueError, TypeError, KeyError):
            continue  # an entry this Pyrula cannot read is not put back
        entries[index] = found
    return kept


def _stored_now(exchanges: Exchanges, keys: Iterable[bytes]) -> list[StoredExchange]:
    """The recordings under those of `keys` the store holds, each whole."""
    stored = []
    for key in keys:
        found = exchanges.get(key)
        if found is not None:
            record = found[0]
            frames = list(exchanges.frames(record, found[1]))
            stored.append(StoredExchange(key, record, exchanges.request(record), frames))
    return stored


def _write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def ignore_cache(folder: Path) -> None:
    """Keep git out of a store used as the cache of text cassettes."""
    ignore = folder / ".gitignore"
    if folder.is_dir() and not ignore.exists():
        ignore.write_text("# Pyrula's cache of the text cassettes, rebuilt from them\n*\n")


def dumps(document: dict[str, Any]) -> str:
    """The one serialisation of a cassette file: JSON with sorted keys and a two-space indent,
    where a list of plain values that fits in `_SHORT` characters (a header pair, frame times)
    stays on one line."""
    return "".join(_pretty(document, "")) + "\n"


_SHORT = 100


def _pretty(value: Any, indent: str) -> Iterator[str]:
    inner = indent + "  "
    if isinstance(value, dict) and value:
        yield "{\n"
        for number, key in enumerate(sorted(value)):
            yield f"{inner}{json.dumps(key, ensure_ascii=False)}: "
            yield from _pretty(value[key], inner)
            yield ",\n" if number < len(value) - 1 else "\n"
        yield indent + "}"
    elif isinstance(value, list) and value:
        flat = json.dumps(value, ensure_ascii=False)
        if len(flat) <= _SHORT and not any(isinstance(v, dict | list) for v in value):
            yield flat
            return
        yield "[\n"
        for number, item in enumerate(value):
            yield inner
            yield from _pretty(item, inner)
            yield ",\n" if number < len(value) - 1 else "\n"
        yield indent + "]"
    else:
        yield json.dumps(value, ensure_ascii=False)


def _entry(
    key: bytes, record: ExchangeRecord, request: dict[str, Any], frames: list[bytes]
) -> dict[str, Any]:
    _, fingerprint, occurrence = split_key(key)
    entry: dict[str, Any] = {field: getattr(record, field) for field in _RECORD_FIELDS}
    entry["headers"] = [list(pair) for pair in record.headers]
    entry["extra"] = dict(record.extra)
    entry.update(fingerprint=fingerprint, occurrence=occurrence, request=request)
    if record.streamed:
        entry["reply"] = {"frames": [_frame_text(f) for f in frames]}
    else:
        if len(frames) > 1:
            entry["extra"].pop("frame_ms", None)  # kept as one body: one frame
        entry["reply"] = body_json(b"".join(frames))
    return entry


def _frame_text(frame: bytes) -> Any:
    encoded = frame_json(frame)
    return encoded.get("text", encoded)


def body_json(body: bytes) -> dict[str, Any]:
    """A plain reply body in its most readable form that gives back the same bytes."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(body).decode("ascii")}
    if "\n" not in text:
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            value = None
        else:
            for layout, options in _LAYOUTS.items():
                if json.dumps(value, **options) == text:
                    return {"json": value, "layout": layout}
    return {"lines": text.splitlines(keepends=True)}


def body_bytes(reply: Any) -> list[bytes]:
    """The frames a `reply` entry gives back (one for a plain body)."""
    if not isinstance(reply, dict) or len(reply) not in (1, 2):
        raise ValueError("a reply must be one of json, lines, frames or base64")
    if "frames" in reply:
        return [
            item.encode("utf-8") if isinstance(item, str) else frame_bytes(item)
            for item in _list(reply["frames"], "frames")
        ]
    if "json" in reply:
        options = _LAYOUTS.get(str(reply.get("layout")))
        if options is None:
            raise ValueError(f"unknown JSON layout {reply.get('layout')!r}")
        return [json.dumps(reply["json"], **options).encode("utf-8")]
    if "lines" in reply:
        lines = _list(reply["lines"], "lines")
        if not all(isinstance(line, str) for line in lines):
            raise ValueError("lines must be strings")
        return ["".join(lines).encode("utf-8")]
    if isinstance(reply.get("base64"), str):
        return [base64.b64decode(reply["base64"], validate=True)]
    raise ValueError("a reply must be one of json, lines, frames or base64")


def _list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError(f"{what} is not a list")
    return value


def parse(data: bytes, name: str, path: Path) -> list[StoredExchange]:
    """The exchanges of a cassette file, keyed for cassette `name`; `CassetteFileError` naming
    the file and the entry when it cannot be read."""
    try:
        document = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise CassetteFileError(path, f"it is not JSON ({exc})") from None
    if not isinstance(document, dict) or not isinstance(document.get("exchanges"), list):
        raise CassetteFileError(path, 'it is not a Pyrula cassette (no "exchanges" list)')
    version = document.get("pyrula_cassette")
    if version != FILE_FORMAT:
        raise CassetteFileError(
            path, f"it has cassette format {version!r}; this Pyrula reads {FILE_FORMAT}"
        )
    parsed = []
    for index, entry in enumerate(document["exchanges"]):
        try:
            parsed.append(_stored(entry, name))
        except (ValueError, TypeError, KeyError) as exc:
            raise CassetteFileError(path, f"exchange {index} cannot be read ({exc})") from None
    keys = [item.key for item in parsed]
    if len(set(keys)) != len(keys):
        raise CassetteFileError(path, "two exchanges have the same fingerprint and occurrence")
    return parsed


def _stored(entry: Any, name: str) -> StoredExchange:
    if not isinstance(entry, dict):
        raise ValueError("not an object")
    key = cassette_key(name, str(entry["fingerprint"]), int(entry["occurrence"]))
    request = entry["request"]
    if not isinstance(request, dict):
        raise ValueError("the request is not an object")
    frames = body_bytes(entry["reply"])
    extra = entry.get("extra") or {}
    if not isinstance(extra, dict):
        raise ValueError("extra is not an object")
    record = ExchangeRecord(  # in the newest record format that holds it exactly
        # The id is the key's: the same in every cache, and never another key's.
        id=hashlib.sha256(key).hexdigest()[:32],
        surface=str(entry["surface"]),
        fingerprint=str(entry["fingerprint"]),
        request=request_ref(request),
        method=str(entry["method"]),
        url=str(entry["url"]),
        status=int(entry["status"]),
        headers=[(str(k), str(v)) for k, v in entry["headers"]],
        frames=len(frames),
        size=sum(map(len, frames)),
        pages=0,  # counted when written
        streamed=bool(entry["streamed"]),
        recorded_at=float(entry["recorded_at"]),
        elapsed_ms=float(entry["elapsed_ms"]),
        namespace=name,
        format=RECORD_FORMAT,
        extra=extra,
    )
    return StoredExchange(key, in_newest_format(record), request, frames)


def write_file(path: Path, exchanges: Sequence[StoredExchange]) -> None:
    """Write exchanges of one cassette from another source (`pyrula import-vcr`) as its file."""
    entries = [
        _entry(item.key, item.record, item.request, item.frames)
        for item in sorted(exchanges, key=lambda e: e.key)
    ]
    _write_atomically(path, dumps({"pyrula_cassette": FILE_FORMAT, "exchanges": entries}).encode())
