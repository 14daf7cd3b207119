"""Live updates (server-sent events): what lands in the store shows on an open page without a
reload, and the streams end when their client leaves or the server stops."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import httpx
from playwright.sync_api import Page, expect

import pyrula
from pyrula.journal.store import Store
from pyrula.runtime import RunStore, submit
from pyrula.ui import create_app
from tests.cli.support import Provider, ask, make_client
from tests.fakes.clock import wait_until
from tests.runtime.support import drive
from tests.ui.support import served, shot, two_calls


def _mark_page(page: Page) -> None:
    """Leave a mark in the page's window: a reload would wipe it."""
    page.evaluate("window.pyrulaTestMark = 'still the same page'")


def _not_reloaded(page: Page) -> None:
    assert page.evaluate("window.pyrulaTestMark") == "still the same page"


def _drive(store: Path) -> None:
    """Run the queued runs to rest, off this thread (Playwright's sync API holds its loop)."""
    with ThreadPoolExecutor(1) as thread:
        thread.submit(drive, Store(store, create=False)).result()


def test_an_exchange_recorded_after_the_page_loaded_appears_at_its_top(
    page: Page, store: Path
) -> None:
    with served(store) as url:
        page.goto(url)
        rows = page.locator("table.list tbody tr")
        expect(rows).to_have_count(3)
        _mark_page(page)

        with pyrula.cassette("late-arrival", store=store):
            ask(make_client(Provider()), "Anyone there?")

        expect(rows).to_have_count(4)
        expect(rows.first).to_contain_text("late-arrival")
        _not_reloaded(page)
        # The row is a row like the others: it opens its exchange.
        rows.first.locator("a.id").click()
        expect(page.locator(".conversation")).to_contain_text("Anyone there?")


def test_a_runs_calls_arrive_live_with_the_run_linked_to_its_timeline(
    page: Page, store: Path, tmp_path: Path
) -> None:
    handle = submit(two_calls, "T-7", store=Store(store, create=False))
    with served(store) as url:
        page.goto(f"{url}/exchanges")
        expect(page.locator("table.list tbody tr")).to_have_count(3)
        _mark_page(page)

        _drive(store)

        made_by_run = page.locator("table.list tbody tr").filter(has_text=handle.id)
        expect(made_by_run).to_have_count(2)
        expect(page.locator("table.list tbody tr").first).to_contain_text(handle.id)
        _not_reloaded(page)
        shot(page, tmp_path, "exchanges-live")
        made_by_run.first.locator("a.run").click()
        expect(page.locator("h1")).to_contain_text(handle.id)
        expect(page.locator("#run-status")).to_have_text("completed")
        expect(page.locator("tr.ev.llm-done")).to_have_count(2)


def test_a_run_page_follows_the_run_as_its_events_land(page: Page, store: Path) -> None:
    handle = submit(two_calls, "T-8", store=Store(store, create=False))
    with served(store) as url:
        page.goto(f"{url}/runs/{handle.id}")
        expect(page.locator("#run-status")).to_have_text("queued")
        expect(page.locator("tr.ev.llm-done")).to_have_count(0)
        _mark_page(page)

        _drive(store)

        expect(page.locator("#run-status")).to_have_text("completed")
        expect(page.locator("tr.ev.llm-done")).to_have_count(2)
        expect(page.locator("#timeline")).to_contain_text("run:done")
        _not_reloaded(page)
    assert RunStore(Store(store, create=False)).get(handle.id).status == "completed"


def _opened(client: httpx.Client, url: str, stack: ExitStack) -> Iterator[str]:
    """An exchange stream's lines, read up to the first one (the browser's reconnect delay)."""
    stream = stack.enter_context(client.stream("GET", f"{url}/live/exchanges"))
    assert stream.headers["content-type"].startswith("text/event-stream")
    lines = stream.iter_lines()
    assert next(lines).startswith("retry:")
    return lines


def test_a_stream_ends_when_its_client_leaves(store: Path) -> None:
    app = create_app(store)
    with served(store, app=app) as url, httpx.Client(timeout=30) as client:
        with ExitStack() as stack:
            lines = _opened(client, url, stack)  # held: dropping it would close the stream
            assert app.state.live_streams == 1
        del lines
        wait_until(lambda: app.state.live_streams == 0, "the server to let the stream go")


def test_the_server_stops_with_a_stream_open_and_ends_it(store: Path) -> None:
    app = create_app(store)
    with httpx.Client(timeout=30) as client, ExitStack() as stack:
        with served(store, app=app) as url:  # leaving it fails if the server did not stop
            lines = _opened(client, url, stack)
            assert app.state.live_streams == 1
        # The server ended the stream as it stopped: what is left of it reads to a clean end
        # (a response cut off would raise here).
        rest = list(lines)
        assert not [line for line in rest if line.startswith("event:")]
        assert app.state.live_streams == 0
