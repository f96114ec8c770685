# SPDX-License-Identifier: MIT
"""The exceptions of the zkd module: every error the API answers is an ApiError."""

from __future__ import annotations

from typing import Any, Optional


class ApiError(Exception):
    """An error answered by zkd's HTTP API (``{"error":{"code","message"}}``), or a task
    that ended otherwise than succeeded (TaskFailed).

    code: the API's machine-readable code ("unknown_task", "queue_full", ...);
    status: the HTTP status (None when no answer came: code "connection");
    message: for people; task_id: the task concerned, when there is one.
    """

    def __init__(
        self,
        code: str,
        message: str,
        status: Optional[int] = None,
        task_id: Optional[str] = None,
    ) -> None:
        super().__init__(f"{code}: {message}" if message else code)
        self.code = code
        self.message = message
        self.status = status
        self.task_id = task_id


class Unauthorized(ApiError):
    """401: no token, or a wrong one."""


class InvalidTask(ApiError):
    """400 invalid_task: the task breaks a rule (its type name, priority, ...)."""


class UnservedType(ApiError):
    """409 unserved_type: workers are there and none serves the type (nothing was
    submitted; submit with allow_unserved=True for a worker about to join)."""


class UnknownTask(ApiError):
    """404 unknown_task: never submitted, or its result was consumed."""


class QueueFull(ApiError):
    """429 queue_full: the cluster's queue is at its bound; nothing was submitted."""


class InvalidSpec(ApiError):
    """400 invalid_spec: a workflow spec that is not JSON, not a DAG, names an unknown step,
    or breaks another rule (the message says which); nothing was created."""


class UnknownWorkflow(ApiError):
    """404 unknown_workflow: no such workflow (never submitted, or deleted after its
    retention)."""


class InvalidSchedule(ApiError):
    """400 invalid_schedule: the schedule breaks a rule (its name, expression, zone,
    option); nothing was stored."""


class UnknownSchedule(ApiError):
    """404 unknown_schedule: no schedule of that name."""


class ScheduleExists(ApiError):
    """409 schedule_exists: a schedule of that name exists already (nothing was changed)."""


class Unavailable(ApiError):
    """503: ZooKeeper unreachable, no cluster in the namespace, or the server busy; or no
    answer at all (code "connection")."""


class WaitTimeout(ApiError, TimeoutError):
    """A wait ran out before the task finished (code "wait_timeout"); the task goes on."""


class TaskFailed(ApiError):
    """The task ended, but did not succeed. code and message are the result's error
    (handler_error, or the code the handler gave); state is "failed", "timed_out",
    "cancelled" or "lost"; result is the result as stored (a dict)."""

    def __init__(self, task_id: str, state: str, code: str, message: str, result: Any) -> None:
        super().__init__(code, message, status=200, task_id=task_id)
        self.state = state
        self.result = result


class TaskTimedOut(TaskFailed):
    """The task's own time limit ran out (state timed_out)."""


class TaskCancelled(TaskFailed):
    """The task was cancelled (state cancelled)."""


class TaskLost(TaskFailed):
    """The task ran out of attempts with its workers dying (state lost)."""


_BY_CODE = {
    "unauthorized": Unauthorized,
    "invalid_task": InvalidTask,
    "unserved_type": UnservedType,
    "unknown_task": UnknownTask,
    "queue_full": QueueFull,
    "invalid_spec": InvalidSpec,
    "unknown_workflow": UnknownWorkflow,
    "invalid_schedule": InvalidSchedule,
    "unknown_schedule": UnknownSchedule,
    "schedule_exists": ScheduleExists,
}

_BY_STATE = {
    "timed_out": TaskTimedOut,
    "cancelled": TaskCancelled,
    "lost": TaskLost,
}


def api_error(status: int, code: str, message: str, task_id: Optional[str] = None) -> ApiError:
    """The exception for an error answer: the class of its code, else of its status."""
    cls = _BY_CODE.get(code)
    if cls is None:
        cls = Unavailable if status == 503 else ApiError
    return cls(code, message, status=status, task_id=task_id)


def task_failed(task_id: str, result: dict) -> TaskFailed:
    """The exception for a result whose state is not succeeded."""
    state = str(result.get("state", "failed"))
    error = result.get("error") or {}
    code = str(error.get("code", state))
    message = str(error.get("message", ""))
    return _BY_STATE.get(state, TaskFailed)(task_id, state, code, message, result)
