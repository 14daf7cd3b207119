"""`pyrula ui` in a real browser (Chromium, driven by Playwright): what a person clicks and reads.

Each test also writes a screenshot of the page it ends on; with PYRULA_UPDATE_SCREENSHOTS=1 they
go to docs/img (the pictures in docs/ui.md).
"""

from __future__ import annotations

import os
import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from playwright.sync_api import Page, expect

from pyrula.journal.store import Store
from pyrula.runtime import RunStore, submit
from pyrula.workflows import WorkflowContext, workflow
from tests.cli.support import STORY
from tests.fakes.clock import wait_until
from tests.runtime.support import (
    WorkerProcess,
    ask,
    async_openai,
    chat_upstream,
    run_to_rest,
)
from tests.ui.support import screenshot_dir, served

APP = "tests.runtime.worker_app"
UPSTREAM = chat_upstream()


@workflow(name="ui_two_calls")
async def two_calls(ctx: WorkflowContext, ticket: str) -> str:
    client = async_openai(UPSTREAM)
    first = await ask(client, f"summarise {ticket}")
    await ctx.step("file", lambda: f"filed {ticket}")
    return await ask(client, f"reply to {first}")


def _shot(page: Page, tmp_path: Path, name: str) -> None:
    target = screenshot_dir(tmp_path) / f"ui-{name}.png"
    page.screenshot(path=str(target), full_page=True)
    assert target.stat().st_size > 0


def test_list_filter_open_a_streamed_exchange_and_see_its_text(
    page: Page, store: Path, tmp_path: Path
) -> None:
    with served(store) as url:
        page.goto(url)
        rows = page.locator("table.list tbody tr")
        expect(rows).to_have_count(3)
        _shot(page, tmp_path, "exchanges")

        page.fill("input[name=cassette]", "chat-stream")
        page.click("button:has-text('Filter')")
        expect(rows).to_have_count(1)
        expect(rows.first).to_contain_text("chat-stream")
        expect(rows.first).to_contain_text("yes")  # streamed

        rows.first.locator("a.id").click()
        expect(page.locator("pre.reply-text")).to_have_text(STORY)
        expect(page.locator(".conversation")).to_contain_text("Tell a story")
        _shot(page, tmp_path, "exchange")


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
        _shot(page, tmp_path, "diff")


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
        _shot(page, tmp_path, "run")
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
            _shot(page, tmp_path, "parked")
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
        _shot(page, tmp_path, "run-calls")
        calls.nth(0).locator("a:has-text('exchange')").click()
        expect(page.locator(".conversation")).to_contain_text("summarise T-42")
        expect(page.locator("pre.json").last).to_contain_text("answer to summarise T-42")
