# SPDX-License-Identifier: MIT
"""The exceptions the client raises for each answer (no server needed)."""

from __future__ import annotations

import pytest

import zkd
from zkd import errors
from zkd.client import Client, _task_body


@pytest.mark.parametrize(
    "status, code, cls",
    [
        (401, "unauthorized", zkd.Unauthorized),
        (400, "invalid_task", zkd.InvalidTask),
        (409, "unserved_type", zkd.UnservedType),
        (404, "unknown_task", zkd.UnknownTask),
        (429, "queue_full", zkd.QueueFull),
        (400, "invalid_spec", zkd.InvalidSpec),
        (404, "unknown_workflow", zkd.UnknownWorkflow),
        (400, "invalid_schedule", zkd.InvalidSchedule),
        (404, "unknown_schedule", zkd.UnknownSchedule),
        (409, "schedule_exists", zkd.ScheduleExists),
        (503, "no_cluster", zkd.Unavailable),
        (503, "busy", zkd.Unavailable),
        (400, "bad_query", zkd.ApiError),
        (502, "garbage_result", zkd.ApiError),
    ],
)
def test_error_answers(status, code, cls):
    e = errors.api_error(status, code, "why", task_id="t1")
    assert type(e) is cls and isinstance(e, zkd.ApiError)
    assert (e.status, e.code, e.message, e.task_id) == (status, code, "why", "t1")
    assert str(e) == f"{code}: why"


@pytest.mark.parametrize(
    "state, cls",
    [
        ("failed", zkd.TaskFailed),
        ("timed_out", zkd.TaskTimedOut),
        ("cancelled", zkd.TaskCancelled),
        ("lost", zkd.TaskLost),
    ],
)
def test_results_that_did_not_succeed(state, cls):
    result = {"task": "t1", "state": state, "error": {"code": "c", "message": "m"}}
    e = errors.task_failed("t1", result)
    assert type(e) is cls and isinstance(e, zkd.TaskFailed) and isinstance(e, zkd.ApiError)
    assert (e.state, e.code, e.message, e.task_id, e.result) == (state, "c", "m", "t1", result)


def test_answers_are_read_by_status():
    assert Client._answer(201, b'{"id":"t1"}', None) == (201, {"id": "t1"})
    with pytest.raises(zkd.UnknownTask) as e:
        Client._answer(404, b'{"error":{"code":"unknown_task","message":"no"},"id":"t9"}', None)
    assert e.value.task_id == "t9"  # the body's id wins
    with pytest.raises(zkd.ApiError) as e:
        Client._answer(500, b"<html>oops</html>", "t2")
    assert e.value.code == "bad_answer" and e.value.status == 500 and e.value.task_id == "t2"
    with pytest.raises(zkd.ApiError) as e:
        Client._answer(200, b"not json", None)
    assert e.value.code == "bad_answer"


def test_task_bodies():
    assert _task_body("echo", None, None, None, None, False) == {"type": "echo"}
    assert _task_body("x", [1], 9, 1.5, 2, True) == {
        "type": "x",
        "args": [1],
        "priority": 9,
        "timeout_ms": 1500,
        "max_attempts": 2,
        "allow_unserved": True,
    }
    assert _task_body("x", 0, None, None, None, False)["args"] == 0  # falsy args are sent


def test_wait_timeout_is_a_timeout_error():
    e = zkd.WaitTimeout("wait_timeout", "late", task_id="t1")
    assert isinstance(e, TimeoutError) and isinstance(e, zkd.ApiError)
