"""Durable workflows: `@workflow` bodies, their context, and running them."""

from pyrula.errors import (
    DurableInvocationCancelled,
    IdempotencyConflict,
    ReplayInputChanged,
    RunExists,
    RunFailed,
    StepFailed,
)
from pyrula.runtime import (
    RunHandle,
    Worker,
    WorkflowContext,
    answer,
    cancel,
    fork,
    resume,
    signal,
    submit,
    workflow,
)

__all__ = [
    "DurableInvocationCancelled",
    "IdempotencyConflict",
    "ReplayInputChanged",
    "RunExists",
    "RunFailed",
    "RunHandle",
    "StepFailed",
    "Worker",
    "WorkflowContext",
    "answer",
    "cancel",
    "fork",
    "resume",
    "signal",
    "submit",
    "workflow",
]
