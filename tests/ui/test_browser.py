"""`pyrula ui` in a real browser (Chromium, driven by Playwright): what a person clicks and reads.

Each test also writes a screenshot of the page it ends on; with PYRULA_UPDATE_SCREENSHOTS=1 they
go to docs/img (the pictures in docs/ui.md).
"""

from __future__ import annotations

import os
import re
import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from playwright.sync_api import Page, expect

import pyrula
from pyrula.journal.store import Store
from pyrula.runtime import RunStore, submit
from tests.cli.support import STORY, Provider, ask, make_client
from tests.fakes.clock import wait_until
from tests.runtime.support import WorkerProcess, run_to_rest
from tests.ui.support import served, shot, two_calls

APP = "tests.runtime.worker_app"


def test_list_filter_open_a_streamed_exchange_and_see_its_text(
    page: Page, store: Path, tmp_path: Path
) -> None:
    with served(store) as url:
        page.goto(url)
        rows = page.locator("table.list tbody tr")
        expect(rows).to_have_count(3)
        shot(page, tmp_path, "exchanges")

        page.fill("input[name=cassette]", "chat-stream")
        page.click("button:has-text('Filter')")
        expect(rows).to_have_count(1)
        expect(rows.first).to_contain_text("chat-stream")
        expect(rows.first).to_contain_text("yes")  # streamed

        rows.first.locator("a.id").click()
        expect(page.locator("pre.reply-text")).to_have_text(STORY)
        expect(page.locator(".conversation")).to_contain_text("Tell a story")
        shot(page, tmp_path, "exchange")


def test_two_recordings_side_by_side_as_a_diff_of_json_paths(
    page: Page, store: Path, tmp_path: Path
) -> None:
    with served(store) as url:
        page.goto(f"{url}/exchanges?cassette=chat&surface=openai.chat&status=2xx")
        rows = page.locator("table.list tbody tr")
        # `chat` is a prefix of `chat-stream` too: three rows, of which two plain calls.
        plain = rows.filter(has_not_text="chat-stream")
        expect(plain).to_have_count(2)
        plain.nth(0).locator("input[type=checkbox]").check()
        plain.nth(1).locator("input[type=checkbox]").check()
        page.click("button:has-text('Diff')")
        compared = page.locator("ul.diff.compared")
        expect(compared).to_contain_text("messages[0].content changed")
        expect(compared).to_contain_text("Ping?")
        expect(compared).to_contain_text("Pong?")
        expect(page.locator("ul.diff").nth(1)).to_contain_text("model")
        shot(page, tmp_path, "diff")


def test_a_run_killed_mid_step_and_resumed_shows_both_attempts(
    page: Page, tmp_path: Path, store: Path
) -> None:
    log, gates = tmp_path / "log", tmp_path / "gates"
    gates.mkdir()
    (gates / "0").touch()
    handle = submit("gated", str(log), str(gates), 2, store=Store(store, create=False))
    first = WorkerProcess(store, module=APP)
    try:
        wait_until(lambda: log.exists() and "start 1" in log.read_text(), "step 1 to start")
        first.send(signal.SIGKILL)
        first.exit_code()
    finally:
        first.kill()
    (gates / "1").touch()
    second = WorkerProcess(store, "--until-idle", module=APP)
    try:
        assert second.exit_code() == 0, second.stderr
    finally:
        second.kill()
    assert RunStore(Store(store, create=False)).get(handle.id).status == "completed"

    with served(store) as url:
        page.goto(f"{url}/runs")
        page.click(f"a:has-text('{handle.id}')")
        sections = page.locator("section.attempt")
        expect(page.locator("#run-status")).to_have_text("completed")
        expect(sections.filter(has_text="Attempt 1")).to_contain_text(
            "ended without a closing event"
        )
        expect(sections.filter(has_text="Attempt 2")).to_contain_text("run:done")
        # Step 0 finished in the first attempt and was not run again in the second.
        expect(sections.filter(has_text="Attempt 1")).to_contain_text('"s0"')
        expect(sections.filter(has_text="Attempt 2")).not_to_contain_text('"s0"')
        shot(page, tmp_path, "run")
    assert log.read_text().splitlines() == ["start 0", "done 0", "start 1", "start 1", "done 1"]


def test_answer_a_parked_run_with_the_button_and_watch_it_complete(
    page: Page, tmp_path: Path, store: Path
) -> None:
    handle = submit("asks", store=Store(store, create=False))
    worker = WorkerProcess(store, module=APP)
    try:
        journal = RunStore(Store(store, create=False))
        wait_until(lambda: journal.get(handle.id).status == "parked", "the run to park")
        with served(store) as url:
            page.goto(f"{url}/runs/{handle.id}")
            expect(page.locator("#run-status")).to_have_text("parked")
            expect(page.locator("form.answer")).to_contain_text("proceed?")
            shot(page, tmp_path, "parked")
            page.fill("input[name=value]", "yes")
            page.click("button:has-text('Answer')")
            # The page follows the run live: the worker takes it and it completes.
            expect(page.locator("#run-status")).to_have_text("completed", timeout=60_000)
            expect(page.locator("#timeline")).to_contain_text("told yes")
            expect(page.locator("#timeline")).to_contain_text("interrupt:answer")
    finally:
        worker.send(signal.SIGTERM)
        worker.exit_code()
        worker.kill()
    assert os.path.exists(store)


def test_a_runs_model_calls_add_up_and_link_to_their_exchanges(
    page: Page, tmp_path: Path, store: Path
) -> None:
    # Playwright's sync API holds an event loop on this thread: the run goes on another one.
    with ThreadPoolExecutor(1) as thread:
        handle = thread.submit(
            run_to_rest, two_calls, "T-42", store=Store(store, create=False)
        ).result()
    with served(store) as url:
        page.goto(f"{url}/runs/{handle.id}")
        calls = page.locator("tr.ev.llm-done")
        expect(calls).to_have_count(2)
        expect(calls.nth(1)).to_contain_text("2 calls")  # the spend so far, accumulating
        shot(page, tmp_path, "run-calls")
        calls.nth(0).locator("a:has-text('exchange')").click()
        expect(page.locator(".conversation")).to_contain_text("summarise T-42")
        expect(page.locator("pre.json").last).to_contain_text("answer to summarise T-42")


def test_exchanges_list_newest_first_and_page_back_and_forth(page: Page, tmp_path: Path) -> None:
    store = tmp_path / "many"
    client = make_client(Provider())
    for i in range(110):  # one cassette each, so a row says which call it was
        with pyrula.cassette(f"call-{i:03d}", store=store):
            ask(client, f"question {i}")

    def shown() -> list[str]:
        return page.locator("table.list tbody tr td:nth-child(3)").all_inner_texts()

    with served(store) as url:
        page.goto(url)
        newest = [f"call-{i:03d}" for i in range(109, 59, -1)]
        expect(page.locator("table.list tbody tr").first).to_have_text(re.compile("call-109"))
        assert shown() == newest
        expect(page.locator("a.previous")).to_have_count(0)  # the first page

        page.click("a.next")
        expect(page.locator("table.list tbody tr").first).to_contain_text("call-059")
        assert shown() == [f"call-{i:03d}" for i in range(59, 9, -1)]
        page.click("a.next")
        expect(page.locator("table.list tbody tr").first).to_contain_text("call-009")
        assert shown() == [f"call-{i:03d}" for i in range(9, -1, -1)]
        expect(page.locator("a.next")).to_have_count(0)  # the oldest: nothing further

        page.click("a.previous")
        expect(page.locator("table.list tbody tr").first).to_contain_text("call-059")
        assert shown() == [f"call-{i:03d}" for i in range(59, 9, -1)]
        page.click("a.previous")
        expect(page.locator("table.list tbody tr").first).to_contain_text("call-109")
        assert shown() == newest
        expect(page.locator("a.previous")).to_have_count(0)
