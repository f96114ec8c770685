# SPDX-License-Identifier: MIT
"""zkd from Python (docs/python.md): a client of the HTTP API (`zkd.Client`), and the
program side of exec serve mode (`@zkd.task`, `zkd.serve()`). Standard library only."""

from .client import Client, Task, TaskStatus, Workflow
from .errors import (
    ApiError,
    InvalidSchedule,
    InvalidSpec,
    InvalidTask,
    QueueFull,
    ScheduleExists,
    TaskCancelled,
    TaskFailed,
    TaskLost,
    TaskTimedOut,
    Unauthorized,
    Unavailable,
    UnknownSchedule,
    UnknownTask,
    UnknownWorkflow,
    UnservedType,
    WaitTimeout,
)
from .serve import (
    Cancelled,
    TaskContext,
    TaskError,
    cancelled,
    checkpoint,
    progress,
    serve,
    task,
    task_context,
)

__version__ = "0.1.0"

__all__ = [
    "ApiError",
    "Cancelled",
    "Client",
    "InvalidSchedule",
    "InvalidSpec",
    "InvalidTask",
    "QueueFull",
    "ScheduleExists",
    "Task",
    "TaskCancelled",
    "TaskContext",
    "TaskError",
    "TaskFailed",
    "TaskLost",
    "TaskStatus",
    "TaskTimedOut",
    "Unauthorized",
    "Unavailable",
    "UnknownSchedule",
    "UnknownTask",
    "UnknownWorkflow",
    "UnservedType",
    "WaitTimeout",
    "Workflow",
    "cancelled",
    "checkpoint",
    "progress",
    "serve",
    "task",
    "task_context",
]
