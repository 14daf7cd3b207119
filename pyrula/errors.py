"""Every public error Pyrula raises, in one place. Each message names the fix.

    Exception
    ├── PyrulaError                      catch this for any failure Pyrula reports
    │   ├── StoreError                   the journal store could not be opened or used
    │   │   ├── StoreNotFound            no store at the path, where nothing would be recorded
    │   │   ├── StoreFull                the disk has no room for the next commit
    │   │   ├── NotAStore
    │   │   ├── StoreCorrupt
    │   │   ├── StoreFormatError
    │   │   ├── RestoreRefused           an exported exchange cannot be written back
    │   │   └── StoreUnavailable         the PostgreSQL server stayed unreachable past the retries
    │   │       └── StatementTimeout     a statement waited on the server past statement_timeout
    │   │   └── CassetteFileError        a text cassette file cannot be read
    │   ├── PayloadTooLarge
    │   ├── StreamFormatError
    │   ├── ProviderStreamTruncated
    │   ├── UnjournaledSurface
    │   ├── RunError
    │   │   ├── RunNotFound
    │   │   ├── RunExists
    │   │   ├── IdempotencyConflict      also a ValueError
    │   │   └── WorkflowNotRegistered
    │   ├── RunFailed                    an awaited run failed with an error not rebuilt here
    │   ├── StepFailed                   a journaled error whose own class cannot be rebuilt
    │   ├── SurfaceUnavailable           also an AttributeError: the SDK release lacks a surface
    │   ├── MissingExtra                 also an ImportError: names the missing extra's pip command
    │   ├── ToolRefused
    │   ├── IntegrationSetupError        a LangGraph node with no checkpointer or no worker
    │   ├── NotYetSupported              also a NotImplementedError: names what to use instead
    │   ├── ToolRegistrationError        a tool cannot be served as declared (MCP)
    │   ├── AtomicToolViolation          an MCP tool body tried a durable orchestration call
    │   ├── ToolServerUnavailable        the MCP tool server's store or worker is missing
    │   ├── VerifyMismatch               also a UserWarning: cassette mode `verify` warns with it
    │   ├── UnjournaledWork              also a UserWarning: a framework's work the run won't replay
    │   ├── JournalCommandError          `pyrula journal` (the CLI)
    │   │   ├── UnknownRecord
    │   │   ├── AmbiguousRecord
    │   │   └── BadExport
    │   └── ProxyError                   `pyrula proxy`
    │       └── ConfigError
    BaseException
    └── JournalRefusal                   the journal refused a call inside the SDK's send
        ├── RecordRefused
        ├── OfflineViolation
        │   ├── ReplayMiss
        │   └── NetworkBlocked
        ├── ReplayInputChanged
        ├── RunAttemptEnded
        ├── DurableInvocationCancelled
        └── BudgetExceeded
            └── LiveBudgetExceeded       a case's live budget: the call was not sent

Why a `BaseException` branch: a `JournalRefusal` is raised from inside a transport, that is from
inside the SDK's own send and retry loop. The SDKs catch `Exception` there and retry it (openai
2.x sleeps through its retries and then raises `APIConnectionError`), which would bury the one
message that names the fix and, for a refused or over-budget call, send it again. Deriving from
`BaseException`, as pytest's outcome exceptions do, lets it pass through those loops untouched
to the caller, who catches it by name. A step's, tool's or child run's own error replays as its
own class (see `pyrula.runtime.failures`); `StepFailed` stands in only where that class cannot be
rebuilt.

The runtime also unwinds through two private `BaseException` signals that never reach the
caller: a run parking (`Park`) and a journaled provider error on its way to the drop-in that
rebuilds it as the SDK's own exception (`ReplayedFailure`).
"""

from __future__ import annotations

from collections.abc import Iterable


class PyrulaError(Exception):
    """Base class of all Pyrula errors."""


class StoreError(PyrulaError):
    """The journal store could not be opened or used."""


class StoreNotFound(StoreError):
    """No store where one was expected: nothing would be recorded there, so none is created.

    A mistyped path must not silently become an empty store that every replay then misses."""

    def __init__(self, path: object, fix: str) -> None:
        self.path = path
        super().__init__(f"no Pyrula store at {path}; {fix}")


class StoreFull(StoreError):
    """The disk under the store has no room for the next commit. Nothing was half-written:
    the transaction was rolled back. Free space, then resume (a run is left to be resumed)."""

    def __init__(self, path: object, free_bytes: int | None, cause: object) -> None:
        self.path = path
        self.free_bytes = free_bytes
        free = f"{free_bytes:,} bytes free" if free_bytes is not None else "free space unknown"
        super().__init__(
            f"the store at {path} could not commit ({cause}; {free} on its disk); "
            "free some space and try again"
        )


class NotAStore(StoreError):
    """The folder exists but holds something other than a Pyrula store."""


class StoreCorrupt(StoreError):
    """The store's files are damaged or not LMDB at all."""


class StoreFormatError(StoreError):
    """The store was written by a newer (or unknown) Pyrula format."""


class RestoreRefused(StoreError):
    """An exported exchange cannot be written back as it was; `index` says which one."""

    def __init__(self, message: str, *, index: int) -> None:
        self.index = index
        super().__init__(message)


class PayloadTooLarge(PyrulaError):
    """A record is bigger than the store's per-record cap."""

    def __init__(self, size: int, cap: int, what: str = "record") -> None:
        self.size = size
        self.cap = cap
        super().__init__(
            f"{what} of {size:,} bytes is over the store's per-record cap of {cap:,} bytes; "
            "raise it with Store(max_event_payload_bytes=...) (also named max_record_bytes) or "
            "PYRULA_MAX_EVENT_PAYLOAD_BYTES (or PYRULA_MAX_RECORD_BYTES); image, audio and other "
            "multimodal replies run to several MB, so for them set it to e.g. 8000000"
        )


class JournalRefusal(BaseException):
    """The journal refused a call at the transport: raised from inside the SDK's send.

    Like pytest's own outcome exceptions these derive from BaseException: SDKs wrap and retry
    any `Exception` raised by their transport (openai 2.x turns it into `APIConnectionError`
    after sleeping through its retries), which would bury the one message that names the fix.
    Catch them by name.
    """


class RecordRefused(JournalRefusal):
    """Carries a `PayloadTooLarge`, or a `StoreError` met while committing a reply (a full
    disk), out of an SDK call untouched: the SDK would otherwise retry the paid request (openai
    2.x reads a reply's body inside its retry loop). The drop-in or cassette raises the error
    itself once the call has unwound."""

    def __init__(self, error: PayloadTooLarge | StoreError) -> None:
        self.error = error
        super().__init__(str(error))


class OfflineViolation(JournalRefusal):
    """A replay-only block asked for something it does not have."""


class ReplayMiss(OfflineViolation):
    """A replay-only cassette was asked for a request it never recorded."""

    def __init__(self, message: str, *, nearest: str | None = None, diffs: list[str] | None = None):
        self.nearest = nearest
        self.diffs = diffs or []
        super().__init__(message)


class NetworkBlocked(OfflineViolation):
    """A request tried to reach the network while a replay-only cassette was active."""


class StreamFormatError(PyrulaError):
    """A recorded or live stream could not be framed (malformed or truncated bytes)."""


class ProviderStreamTruncated(PyrulaError):
    """The provider ended a stream without its terminal frame; inside a run this is the call's
    journaled outcome, so a resumed run raises it again without sending the request."""


class ReplayInputChanged(JournalRefusal):
    """A resumed run asked something different at a recorded position."""

    def __init__(self, message: str, *, differences: list[str] | None = None) -> None:
        self.differences = differences or []
        super().__init__(message)


class RunError(PyrulaError):
    """A durable run could not be submitted, found or driven."""


class RunNotFound(RunError):
    """No run with that id in the store."""


class RunExists(RunError):
    """A run with that id was already submitted (pass an idempotency key to re-attach)."""


class IdempotencyConflict(RunError, ValueError):
    """An idempotency key was reused with a different input."""


class WorkflowNotRegistered(RunError):
    """A worker was handed a run whose workflow it has not imported."""


class RunAttemptEnded(JournalRefusal):
    """This attempt lost its lease (another worker took the run over): stop writing."""


class DurableInvocationCancelled(JournalRefusal):
    """The run was cancelled; raised in the body at its next boundary and to awaiting callers."""


class BudgetExceeded(JournalRefusal):
    """A model call would break one of the run's `AgentLimits`; it was not sent."""

    def __init__(self, message: str, *, limit: str, code: str = "budget_exceeded") -> None:
        self.limit = limit
        self.code = code
        super().__init__(message)


class LiveBudgetExceeded(BudgetExceeded):
    """A case (a test, an `AgentRunner` run, a `LiveBudget` block) would spend past its live
    budget on a model call going out live; it was not sent. A replay spends nothing, so it is
    never refused; `code` is `live_budget_exceeded` (`unpriced_model`: the budget cannot be held
    because the model has no price)."""

    def __init__(
        self, message: str, *, limit: str = "live_budget_usd", code: str = "live_budget_exceeded"
    ) -> None:
        super().__init__(message, limit=limit, code=code)


class StepFailed(PyrulaError):
    """A step, tool or run failed on an earlier attempt with an error whose class cannot be
    rebuilt here (one defined inside a function, or no longer importable). It carries the
    original message; `type_name`, `qualname` and `module` name the original class."""

    def __init__(self, type_name: str, message: str, *, module: str = "", qualname: str = ""):
        self.type_name = type_name
        self.module = module
        self.qualname = qualname or type_name
        super().__init__(message)
        self.add_note(
            f"replayed from the journal: the original {self.qualname} "
            f"({module or 'unknown module'}) cannot be rebuilt in this process"
        )


class RunFailed(PyrulaError):
    """The awaited run ended in failure; `.error` holds what its body raised."""

    def __init__(self, message: str, *, status: str, error: dict[str, object] | None = None):
        self.status = status
        self.error = error or {}
        super().__init__(message)


class UnjournaledSurface(PyrulaError):
    """A call inside a run that cannot be journaled; the message names what to use instead."""


class SurfaceUnavailable(AttributeError, PyrulaError):
    """A drop-in was asked for an SDK surface the installed SDK release does not have yet.

    Still an `AttributeError` (the SDK object lacks the attribute), but one that names the
    installed release and the one that brought the surface."""

    def __init__(self, sdk: str, installed: str, path: str, since: str) -> None:
        self.sdk, self.installed, self.path, self.since = sdk, installed, path, since
        needs = f"{sdk} {since} or later" if since else f"a newer {sdk} release"
        pin = f"'{sdk}>={since}'" if since else sdk
        super().__init__(
            f"`{path}` is not in {sdk} {installed}, the release installed here; it needs {needs}: "
            f"`pip install -U {pin}`"
        )


class MissingExtra(ImportError, PyrulaError):
    """Something needs an optional extra whose packages are not installed here.

    Still an `ImportError` (a package did not import; it is kept as `__cause__`), but one whose
    message names the feature that needs it and the exact pip command:
    `MissingExtra("a postgresql:// store", "postgres", ("psycopg",), needs="psycopg 3 and its
    pool")` reads "a postgresql:// store needs psycopg 3 and its pool (psycopg is not
    installed): pip install 'pyrula[postgres]'". `extra` may name several (`"agents,bedrock"`);
    `alternative` is another way out ("pass api_key= a Bedrock API key")."""

    def __init__(
        self,
        feature: str,
        extra: str,
        packages: Iterable[str | None] = (),
        *,
        needs: str = "",
        alternative: str = "",
    ) -> None:
        self.feature, self.extra = feature, extra
        self.packages = tuple(name for name in packages if name)
        self.pip_command = f"pip install 'pyrula[{extra}]'"
        missing = ""
        if self.packages:
            verb = "is" if len(self.packages) == 1 else "are"
            missing = f" ({', '.join(self.packages)} {verb} not installed)"
        also = f"; or {alternative}" if alternative else ""
        super().__init__(
            f"{feature} needs {needs or f'the {extra} extra'}{missing}: {self.pip_command}{also}",
            name=self.packages[0] if self.packages else None,
        )


class ToolRefused(PyrulaError):
    """A tool call was not allowed: a reviewer declined it, or its per-run limit is reached."""


class VerifyMismatch(UserWarning, PyrulaError):
    """A live reply no longer has the structure of its recording (cassette mode `verify`)."""


class JournalCommandError(PyrulaError):
    """A `pyrula journal` command could not do what it was asked."""


class UnknownRecord(JournalCommandError):
    """No recorded exchange has an id starting with the given prefix."""


class AmbiguousRecord(JournalCommandError):
    """More than one recorded exchange has an id starting with the given prefix."""

    def __init__(self, prefix: str, candidates: list[str]) -> None:
        self.prefix = prefix
        self.candidates = candidates
        shown = ", ".join(candidates[:8]) + (", ..." if len(candidates) > 8 else "")
        super().__init__(
            f"id prefix {prefix!r} matches {len(candidates)} exchanges ({shown}); "
            "give more characters of the id"
        )


class BadExport(JournalCommandError):
    """A file given to `pyrula journal import` is not a JSONL export this Pyrula can read."""


class ProxyError(PyrulaError):
    """The proxy could not start or keep serving."""


class ConfigError(ProxyError):
    """A proxy option is invalid or unsafe."""


class ModelHTTPError(PyrulaError):
    """A native model client's call failed: the provider answered `status` (0: the request was
    sent but no reply came). Inside a run it is the call's journaled outcome, raised again on a
    resume without sending anything."""

    def __init__(self, message: str, *, status: int, body: str = "") -> None:
        self.status = status
        self.body = body
        super().__init__(message)


class OutputValidationFailed(PyrulaError):
    """A native agent's structured output stayed invalid after its bounded re-asks."""


class MaxTurnsExceeded(PyrulaError):
    """A native agent used its `max_turns` model turns without reaching a final answer."""


class MCPToolError(PyrulaError):
    """An MCP tool answered with an error (`isError`); journaled as the tool's outcome and
    raised again as this class on a replay."""


class IntegrationSetupError(PyrulaError):
    """A framework integration is used in a setting it cannot work in (a LangGraph graph with no
    checkpointer, a store no worker consumes); the message names what to add."""


class NotYetSupported(PyrulaError, NotImplementedError):
    """A documented part of an integration that is not built yet; the message names what to use
    instead."""


class UnjournaledWork(UserWarning, PyrulaError):
    """Warned inside a run about work a framework does outside the journal (sent again, or lost,
    on a resume); the message names what to use instead."""


class ToolRegistrationError(PyrulaError):
    """A tool cannot be served as asked (an MCP tool that would need a reviewer, two tools of one
    name, a tool that is not a `@tool` or plain function); the message says what to change."""


class AtomicToolViolation(PyrulaError):
    """A tool served over MCP is one atomic step: its body called `ctx.step`, `ctx.interrupt`,
    a timer, a signal or a child run. Do that orchestration in a workflow that calls the tool."""


class ToolServerUnavailable(PyrulaError):
    """The durable tool server could not run a call: its store cannot be used, or no worker took
    the run within the server's `worker_timeout`. The message says what to start or fix."""


class StoreUnavailable(StoreError):
    """A PostgreSQL store's server could not be reached, or the connection kept dropping, for
    longer than the retry window (`PYRULA_PG_RETRY_SECONDS`). Nothing half-written was kept:
    each fact commits whole or not at all."""


class StatementTimeout(StoreUnavailable):
    """The server cancelled a statement of a PostgreSQL store that waited past its
    `statement_timeout` (`PYRULA_PG_STATEMENT_SECONDS`, default 60): behind a lock or a table
    another session held, or on a server too busy to answer. Nothing of the write was kept (its
    transaction is rolled back whole), and it is not retried: the caller is told. A worker
    leaves the run to be resumed, as for any `StoreUnavailable`."""


class UIConfigError(PyrulaError):
    """`pyrula ui` cannot start as asked: an address off loopback without a token, a short
    token, a port that is not a number. The message names the flag to use (the `ui` extra not
    installed is a `MissingExtra`)."""


class CassetteFileError(StoreError):
    """A text cassette file cannot be read; the message names the file and what is wrong."""

    def __init__(self, path: object, problem: str) -> None:
        self.path = path
        super().__init__(
            f"cassette file {path} cannot be used: {problem}; fix it (see its git history) "
            "or delete it and record the test again with --pyrula-record-mode=once"
        )
