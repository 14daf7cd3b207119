"""The durable half of `pyrula demo`: an agent run whose worker is SIGKILLed mid-run, then resumed.

The agent (`pyrula-demo-agent`) makes five model calls with the real `openai.AsyncOpenAI` client,
over Pyrula's journaling transport for the SDK's HTTP stack, to the local stand-in provider; after
each call a step does a little work, and after the second one a `@tool` appends a line to a notes
file in the store folder. Workers are real processes (`python -m pyrula.demo.durable STORE`).

`run_durable` submits the run, starts a worker, waits until three model calls are journaled
(the run is then inside the step that follows the third call, with no call in flight), kills
the worker with SIGKILL, reaps it (a dead process's lease is void at once on this host), starts a
second worker and waits for it to finish the run. Journaled calls are replayed from the journal,
not sent again. The counts it reports come from the stand-in's own request log, in this process,
never from the journal or the workers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import openai
from rich.console import Console
from rich.table import Table

from pyrula.agents import AgentContext, ToolContext, agent, tool
from pyrula.demo.stacks import http_client, stack_name
from pyrula.demo.standin import Received, StandIn
from pyrula.journal import open_store
from pyrula.runtime import RunStore, Worker, cancel, submit
from pyrula.runtime.runstore import COMPLETED, TERMINAL, lease_is_live

AGENT_NAME = "pyrula-demo-agent"
DEMO_KEY = "sk-demo-not-a-real-key"  # the stand-in accepts any key; nothing real is sent
MODEL = "gpt-4o-mini"
NOTES_FILE = "pyrula-demo-notes.txt"  # in the store folder: the tool's side effect
KILL_AFTER = 3  # model calls journaled when the first worker is killed
STEP_SECONDS = 0.3  # the work after each call: the kill lands in it, between two calls
LEASE_SECONDS = 10.0
WORKER_POLL_SECONDS = 0.05
EXIT_SECONDS = 15.0  # for an idle worker to exit by itself
WAIT_SECONDS = 60.0  # for each worker to get where it is expected (slow imports included)

# What the agent asks, in order; each question also carries the previous step's summary.
QUESTIONS: tuple[str, ...] = (
    "List three sights in Lisbon worth a morning.",
    "Which of those suits a rainy day?",
    "Suggest a lunch spot near it.",
    "How long should the afternoon visit take?",
    "Write the day's plan in one line.",
)
STREAMED_CALL = 2  # this call (1-based) is streamed
NOTE_AFTER_CALL = 2  # the tool is called after this call's step


# -- the agent -------------------------------------------------------------------------------------


def _save_note(ctx: ToolContext | None, notes_path: str, text: str) -> dict[str, Any]:
    """A side effect: append one line, tagged with the call's idempotency key, to a notes file."""
    key = ctx.idempotency_key if ctx is not None else None
    line = f"{key or 'no-key'}\t{text}"
    with open(notes_path, "a", encoding="utf-8") as notes:
        notes.write(line + "\n")
        notes.flush()
        os.fsync(notes.fileno())
    return {"saved": key}


save_note = tool(name="save_note")(_save_note)


async def summarise(number: int, reply_id: str, text: str) -> dict[str, Any]:
    """The little work done after each model call (slow enough for the kill to land in it)."""
    await asyncio.sleep(STEP_SECONDS)
    tag = next((word.rstrip(":") for word in text.split() if word.startswith("#")), "")
    return {"call": number, "reply_id": reply_id, "tag": tag, "words": len(text.split())}


async def _ask(client: openai.AsyncOpenAI, prompt: str, streamed: bool) -> tuple[str, str]:
    messages: Any = [{"role": "user", "content": prompt}]
    if not streamed:
        completion = await client.chat.completions.create(model=MODEL, messages=messages)
        return completion.id, completion.choices[0].message.content or ""
    stream = await client.chat.completions.create(
        model=MODEL, messages=messages, stream=True, stream_options={"include_usage": True}
    )
    ident, parts = "", []
    async for chunk in stream:
        ident = ident or chunk.id
        parts += [c.delta.content for c in chunk.choices if c.delta.content]
    return ident, "".join(parts)


@agent(name=AGENT_NAME)
async def demo_agent(ctx: AgentContext, base_url: str, notes_path: str) -> dict[str, Any]:
    """Five model calls, a step after each, one tool call; re-executed from the top on resume."""
    client = openai.AsyncOpenAI(
        api_key=DEMO_KEY,
        base_url=base_url,
        http_client=http_client(openai, sync=False),
        max_retries=0,  # a retry would be a second provider call: keep the counts exact
    )
    summaries: list[dict[str, Any]] = []
    note: Any = None
    text = ""
    async with client:
        for number, question in enumerate(QUESTIONS, start=1):
            previous = f" (after answer {summaries[-1]['tag']})" if summaries else ""
            reply_id, text = await _ask(client, question + previous, number == STREAMED_CALL)
            summaries.append(await ctx.step("summarise", summarise, number, reply_id, text))
            if number == NOTE_AFTER_CALL:
                note = await save_note(notes_path, text)
    return {"plan": text, "replies": [s["reply_id"] for s in summaries], "note": note}


# -- the worker process ----------------------------------------------------------------------------


def work(store: str) -> int:
    """Run demo-agent runs from `store` until none is left (SIGTERM stops it cleanly)."""
    runner = Worker(
        store,
        lease_seconds=LEASE_SECONDS,
        poll_seconds=WORKER_POLL_SECONDS,
        names={AGENT_NAME},
    )

    async def main() -> int:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, runner.stop)
        return await runner.run(until_idle=True)

    return asyncio.run(main())


# -- the flow --------------------------------------------------------------------------------------


@dataclass
class WorkerProcess:
    number: int
    pid: int
    returncode: int | None = None  # -9 for the one killed with SIGKILL


@dataclass
class DurableResult:
    store: Path
    url: str
    run_id: str
    status: str
    attempt: int
    result: Any
    error: dict[str, Any] | None
    received: list[Received]  # the stand-in's own log, read after the run
    received_at_kill: int  # requests in the stand-in's log when the SIGKILL was sent
    journaled_at_kill: int  # llm:done events in the run's journal then
    workers: list[WorkerProcess]
    notes_path: Path
    notes: list[str]  # the notes file's lines for this run: the tool's side effect
    cancelled_stale: list[str] = field(default_factory=list)
    problem: str | None = None
    elapsed_s: dict[str, float] = field(default_factory=dict)

    @property
    def seen(self) -> Counter[str]:
        """How many times the stand-in received each distinct request."""
        return Counter(received.digest for received in self.received)

    @property
    def live_calls(self) -> int:
        return len(self.seen)

    @property
    def repeated_calls(self) -> int:
        return sum(1 for times in self.seen.values() if times > 1)

    @property
    def killed(self) -> bool:
        return any(w.returncode == -signal.SIGKILL for w in self.workers)

    @property
    def completed(self) -> bool:
        return self.status == COMPLETED

    def failures(self) -> list[str]:
        """What went wrong, if anything: each a reason for `pyrula demo` to exit non-zero."""
        found = [self.problem] if self.problem else []
        if not self.completed:
            found.append(f"the run ended {self.status}, not completed")
        if self.repeated_calls:
            found.append(f"{self.repeated_calls} request(s) reached the provider more than once")
        if self.live_calls != len(QUESTIONS):
            found.append(
                f"{self.live_calls} distinct requests reached the provider, not {len(QUESTIONS)}"
            )
        if len(self.notes) != 1:
            found.append(f"the tool's side effect happened {len(self.notes)} times, not once")
        if not self.killed or self.received_at_kill != KILL_AFTER:
            found.append(f"the kill did not land after call {KILL_AFTER} of {len(QUESTIONS)}")
        return found

    @property
    def ok(self) -> bool:
        return not self.failures()


class DemoStopped(Exception):
    """Something the flow waited for did not happen; the message says what."""


def _start_worker(
    store: Path, number: int, stderr: IO[bytes]
) -> tuple[subprocess.Popen[bytes], WorkerProcess]:
    process = subprocess.Popen(
        [sys.executable, "-m", "pyrula.demo.durable", str(store)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
    )
    return process, WorkerProcess(number, process.pid)


def _llm_done(journal: RunStore, run_id: str) -> int:
    return sum(1 for event in journal.events(run_id) if event.type == "llm:done")


def _wait(
    what: str,
    ready: Callable[[], bool],
    process: subprocess.Popen[bytes],
    stderr: IO[bytes],
) -> None:
    """Poll until `ready()`; stop early if the worker exits first."""
    deadline = time.monotonic() + WAIT_SECONDS
    while not ready():
        if process.poll() is not None:
            if ready():
                return
            raise DemoStopped(
                f"worker (pid {process.pid}) exited with status {process.returncode} before "
                f"{what}{_tail(stderr)}"
            )
        if time.monotonic() > deadline:
            raise DemoStopped(f"gave up after {WAIT_SECONDS:g} s waiting for {what}")
        time.sleep(0.01)


def _tail(stderr: IO[bytes]) -> str:
    stderr.flush()
    stderr.seek(0)
    text = stderr.read().decode(errors="replace").strip()
    return ":\n" + "\n".join(text.splitlines()[-15:]) if text else ""


def _stop(process: subprocess.Popen[bytes], grace: float) -> int:
    """Wait for a worker to exit; SIGTERM (then SIGKILL) it if it does not."""
    for send in (None, signal.SIGTERM, signal.SIGKILL):
        if send is not None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(send)
        with contextlib.suppress(subprocess.TimeoutExpired):
            return process.wait(timeout=grace)
    return process.wait()


def _note_lines(path: Path, run_id: str) -> list[str]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    return [line for line in lines if line.startswith(f"{run_id}:")]


def run_durable(
    store_path: str | os.PathLike[str], say: Callable[[str], None] | None = None
) -> DurableResult:
    """Run the agent, SIGKILL its worker after three model calls, resume it in a second one."""
    tell = say or (lambda line: None)
    store_path = Path(store_path)
    store = open_store(store_path)
    journal = RunStore(store)
    notes_path = store_path / NOTES_FILE
    # A demo run left unfinished by an interrupted earlier demo would be picked up by our workers
    # (and call a stand-in that is gone): cancel it first.
    now = time.time()
    stale = [
        r.id
        for r in journal.runs()
        if r.name == AGENT_NAME
        and r.status not in TERMINAL
        and not lease_is_live(r.lease, now)
        and r.created_at < now - WAIT_SECONDS
    ]
    for run_id in stale:
        cancel(run_id, store=store)
    if stale:
        tell(f"cancelled {len(stale)} unfinished run(s) left by an earlier, interrupted demo")

    timings: dict[str, float] = {}
    workers: list[WorkerProcess] = []
    processes: list[subprocess.Popen[bytes]] = []
    received_at_kill = journaled_at_kill = 0
    doing = ""
    problem: str | None = None
    standin = StandIn().start()
    started = time.perf_counter()
    with tempfile.TemporaryFile() as stderr:
        try:
            handle = submit(AGENT_NAME, standin.openai_base_url, str(notes_path), store=store)
            tell(
                f"submitted run {handle.id} of agent {AGENT_NAME!r}: {len(QUESTIONS)} model "
                f"calls (openai {openai.__version__} AsyncOpenAI over {stack_name(openai)}) and "
                "1 tool call"
            )
            process, first = _start_worker(store_path, 1, stderr)
            processes.append(process)
            workers.append(first)
            tell(f"worker 1 started: pid {first.pid} (python -m pyrula.demo.durable {store_path})")
            _wait(
                f"{KILL_AFTER} model calls were journaled",
                lambda: _llm_done(journal, handle.id) >= KILL_AFTER,
                process,
                stderr,
            )
            # What the provider had received, and the journal held, when the kill was sent.
            received_at_kill = standin.count()
            events = journal.events(handle.id)
            journaled_at_kill = sum(1 for e in events if e.type == "llm:done")
            os.kill(process.pid, signal.SIGKILL)
            if events[-1].type == "llm:done" and received_at_kill == journaled_at_kill:
                doing = f" while the step after call {journaled_at_kill} ran (no call in flight)"
            first.returncode = process.wait()  # reaped: its lease is seen dead at once
            timings["until the kill"] = time.perf_counter() - started
            tell(
                f"SIGKILL sent to worker 1 (pid {first.pid}){doing}: {journaled_at_kill} model "
                f"calls journaled, {received_at_kill} received by the stand-in; it died (exit "
                f"status {first.returncode}) and was reaped, so its lease is void at once"
            )

            started = time.perf_counter()
            process, second = _start_worker(store_path, 2, stderr)
            processes.append(process)
            workers.append(second)
            tell(f"worker 2 started: pid {second.pid}, resuming the run from its journal")
            _wait(
                "the run ended",
                lambda: journal.get(handle.id).status in TERMINAL,
                process,
                stderr,
            )
            # It exits by itself once idle; SIGTERM is only the fallback.
            second.returncode = _stop(process, grace=EXIT_SECONDS)
            timings["resume"] = time.perf_counter() - started
        except DemoStopped as exc:
            problem = str(exc)
        finally:
            for process, worker in zip(processes, workers, strict=True):
                if process.returncode is None:
                    worker.returncode = _stop(process, grace=0.5)
            standin.stop()
        if problem is None and any(w.returncode not in (0, -signal.SIGKILL) for w in workers):
            problem = "a worker failed" + _tail(stderr)

    record = journal.get(handle.id)
    if len(workers) == 2:
        tell(
            f"worker 2 exited with status {workers[-1].returncode}; run {record.id} is "
            f"{record.status} after {record.attempt} attempts"
        )
    return DurableResult(
        store=store_path,
        url=standin.url,
        run_id=record.id,
        status=record.status,
        attempt=record.attempt,
        result=record.result,
        error=record.error,
        received=standin.received,
        received_at_kill=received_at_kill,
        journaled_at_kill=journaled_at_kill,
        workers=workers,
        notes_path=notes_path,
        notes=_note_lines(notes_path, record.id),
        cancelled_stale=stale,
        problem=problem,
        elapsed_s=timings,
    )


# -- showing it ------------------------------------------------------------------------------------


def _plain(console: Console, text: str) -> None:
    console.print(text, markup=False, highlight=False)


def render(
    result: DurableResult,
    console: Console,
    show_run: Callable[[Path, str, Console], None] | None = None,
) -> None:
    """The run's result, the tool's side effect, the journal (shown by `show_run`, else listed
    here), and the stand-in's counts."""
    _plain(console, f"result: {json.dumps(result.result)}")
    if result.error:
        _plain(console, f"error: {result.error.get('type')}: {result.error.get('message', '')}")
    times = "once" if len(result.notes) == 1 else f"{len(result.notes)} times"
    _plain(
        console,
        f"tool save_note ran {times}: {len(result.notes)} line(s) for this run in "
        f"{result.notes_path}",
    )
    for line in result.notes:
        _plain(console, f"  {line}")

    (show_run or list_events)(result.store, result.run_id, console)

    table = Table(
        title="the stand-in's own request log (kept in this process, not by the workers)",
        title_justify="left",
    )
    table.add_column("#", justify="right")
    table.add_column("when")
    table.add_column("request")
    table.add_column("prompt (last user message)", overflow="fold")
    table.add_column("seen", justify="right")
    for number, received in enumerate(result.received, start=1):
        when = "before kill" if number <= result.received_at_kill else "after kill"
        table.add_row(
            str(number),
            when if result.killed else "(no kill)",
            f"POST {received.path}" + (" (stream)" if received.streamed else ""),
            received.prompt,
            f"{result.seen[received.digest]}x",
        )
    console.print(table)
    _plain(
        console,
        f"provider calls: {result.live_calls} live, {result.repeated_calls} repeated after the "
        "crash",
    )
    before = result.received_at_kill
    split = (
        f"{before} before the SIGKILL, {len(result.received) - before} after it"
        if result.killed
        else "no SIGKILL was sent"
    )
    attempts = f"{result.attempt} attempt" + ("s" if result.attempt != 1 else "")
    timing = ", ".join(f"{phase} {secs:.1f} s" for phase, secs in result.elapsed_s.items())
    _plain(
        console,
        f"stand-in log: {len(result.received)} requests, {result.live_calls} distinct; {split}; "
        f"run {result.status} in {attempts}" + (f" ({timing})" if timing else ""),
    )


def list_events(store: Path, run_id: str, console: Console) -> None:
    """A plain listing of the run's events."""
    table = Table("seq", "event", "detail", box=None)
    for event in RunStore(open_store(store)).events(run_id):
        table.add_row(str(event.seq), event.type, json.dumps(event.payload)[:100])
    console.print(table)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m pyrula.demo.durable STORE", file=sys.stderr)
        return 2
    work(argv[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


__all__ = [
    "AGENT_NAME",
    "QUESTIONS",
    "DurableResult",
    "WorkerProcess",
    "demo_agent",
    "list_events",
    "render",
    "run_durable",
    "save_note",
    "work",
]
