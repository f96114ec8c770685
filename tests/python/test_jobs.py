# SPDX-License-Identifier: MIT
"""zkd.Client's delayed tasks, retries, workflows and schedules against a real `zkd run
--http` node and a real ZooKeeper."""

from __future__ import annotations

import time

import pytest

import zkd


def _until(what, check, seconds: float = 30.0):
    """check() until it returns something true (returned), else fails naming `what`."""
    deadline = time.monotonic() + seconds
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {seconds} s (last: {last!r})")


# --- delayed tasks and retries -----------------------------------------------------------


def test_a_delayed_task_is_listed_delayed_then_runs(client):
    task = client.submit("echo", {"later": True}, delay=3)
    status = client.status(task.id)
    assert status.state == "delayed"
    assert status.due_ms is not None and status.due_ms > int(time.time() * 1000)
    assert status.try_number == 1
    listed = client.tasks()
    delayed = {t["id"]: t for t in listed["delayed"]}
    assert task.id in delayed and listed["delayed_total"] >= 1
    assert delayed[task.id]["state"] == "delayed"
    assert delayed[task.id]["due_ms"] == status.due_ms
    assert delayed[task.id]["try"] == 1
    assert client.cluster()["delayed"] >= 1
    assert task.wait(timeout=30) == {"later": True}


def test_at_and_delay_are_exclusive(client):
    with pytest.raises(ValueError):
        client.submit("echo", 1, delay=1, at=123)
    with pytest.raises(zkd.InvalidTask) as e:
        client.submit("echo", 1, retries=1000)
    assert e.value.status == 400 and e.value.code == "invalid_task"


def test_retries_end_with_the_last_try_and_its_earlier_errors(client):
    task = client.submit("fail", "no luck", retries=2, backoff=0.05, backoff_max=0.1)
    with pytest.raises(zkd.TaskFailed) as e:
        task.wait(timeout=60)
    result = e.value.result
    assert result["state"] == "failed" and result["try"] == 3
    assert [err["try"] for err in result["errors"]] == [1, 2]


# --- workflows ---------------------------------------------------------------------------

CHAIN = {
    "name": "py-chain",
    "steps": {
        "numbers": {"type": "echo", "args": [1, 2, 3]},
        "each": {"type": "echo", "map": "numbers"},
        "total": {"type": "sum", "args": [10, 20], "after": ["each"]},
    },
}


def test_run_workflow_and_wait(client):
    wf = client.run_workflow(CHAIN)
    assert isinstance(wf, zkd.Workflow) and wf.id
    ended = wf.wait(timeout=60)
    assert ended["status"] == "succeeded", ended
    assert ended["result"] == {"total": {"sum": 30}}
    assert ended["steps"]["each"]["status"] == "succeeded"
    # The handle keeps the end; status() reads it again.
    assert wf.wait() is ended
    assert wf.status()["status"] == "succeeded"
    assert wf.cancel() is False
    listed = {w["id"]: w for w in client.workflows()}
    assert listed[wf.id]["status"] == "succeeded" and listed[wf.id]["name"] == "py-chain"


def test_run_workflow_with_wait_and_as_text(client):
    import json

    wf = client.run_workflow(json.dumps(CHAIN), wait=30)
    # Ended within the request: the handle holds it, wait() sends nothing.
    assert wf.wait()["status"] == "succeeded"


def test_cancel_a_workflow_and_wait_timeout(client):
    wf = client.run_workflow(
        {"name": "slow", "steps": {"nap": {"type": "sleep", "args": {"ms": 60000}}}}
    )
    with pytest.raises(zkd.WaitTimeout):
        wf.wait(timeout=0.5)
    assert wf.status()["status"] == "running"
    assert wf.cancel() is True
    ended = wf.wait(timeout=60)
    assert ended["status"] == "cancelled"


def test_workflow_errors(client):
    with pytest.raises(zkd.InvalidSpec) as e:
        client.run_workflow({"steps": {"a": {"type": "echo", "after": ["b"]}}})
    assert e.value.status == 400 and e.value.code == "invalid_spec"
    with pytest.raises(zkd.UnservedType):
        client.run_workflow({"steps": {"a": {"type": "no-such-type"}}})
    with pytest.raises(zkd.UnknownWorkflow) as e:
        client.workflow_handle("wf-1700000000000-0123abcd").status()
    assert e.value.status == 404 and e.value.code == "unknown_workflow"
    with pytest.raises(zkd.ApiError) as e:
        client.workflow("not a workflow id")
    assert e.value.status == 400


# --- schedules ---------------------------------------------------------------------------


def test_schedules(client):
    added = client.add_schedule("py-tick", "echo", {"tick": 1}, every=1, priority=7)
    assert added["name"] == "py-tick" and added["every_ms"] == 1000
    assert added["priority"] == 7 and "next_ms" in added
    nightly = client.add_schedule(
        "py-nightly", "echo", cron="30 2 * * *", tz="Europe/Paris", paused=True
    )
    assert nightly["paused"] is True and "next_ms" not in nightly
    names = {s["name"]: s for s in client.schedules()}
    assert {"py-tick", "py-nightly"} <= set(names)
    assert names["py-tick"]["fired"] >= 0
    # It fires: the master creates a task each second.
    fired = _until("py-tick fires", lambda: client.schedule("py-tick")["fired"] >= 1)
    assert fired
    paused = client.pause_schedule("py-tick")
    assert paused["paused"] is True and "next_ms" not in paused
    resumed = client.resume_schedule("py-nightly")
    assert resumed["paused"] is False and "next_ms" in resumed
    client.remove_schedule("py-tick")
    client.remove_schedule("py-nightly")
    with pytest.raises(zkd.UnknownSchedule) as e:
        client.schedule("py-tick")
    assert e.value.status == 404 and e.value.code == "unknown_schedule"
    with pytest.raises(zkd.UnknownSchedule):
        client.remove_schedule("py-tick")
    with pytest.raises(zkd.UnknownSchedule):
        client.pause_schedule("py-tick")


def test_schedule_errors(client):
    with pytest.raises(ValueError):
        client.add_schedule("x", "echo")
    with pytest.raises(zkd.InvalidSchedule) as e:
        client.add_schedule("bad", "echo", cron="61 * * * *")
    assert e.value.status == 400 and e.value.code == "invalid_schedule"
    client.add_schedule("py-twice", "echo", every=3600)
    try:
        with pytest.raises(zkd.ScheduleExists) as e:
            client.add_schedule("py-twice", "echo", every=60)
        assert e.value.status == 409
    finally:
        client.remove_schedule("py-twice")
