# SPDX-License-Identifier: MIT
"""A client of zkd's HTTP API (docs/http.md): submit tasks (now, delayed, with retries),
wait for their results, follow and cancel them; run workflows; manage schedules. Standard
library only (http.client, one keep-alive connection per thread)."""

from __future__ import annotations

import http.client
import json
import os
import ssl
import threading
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Union

from .errors import ApiError, Unavailable, WaitTimeout, api_error, task_failed

# The longest single wait asked of the server (its limit, zkd run's default, is 300 s): a
# longer wait is several requests.
_WAIT_CHUNK_S = 60.0
# The server closes a connection idle for 10 s; one idle this long is not reused.
_IDLE_REUSE_S = 5.0

_UNSET: Any = object()


def _ms(seconds: float) -> int:
    return max(0, int(round(seconds * 1000)))


@dataclass
class TaskStatus:
    """Where a task is (GET /v1/tasks/{id}): state is delayed, pending, assigned, running,
    or the result's state (succeeded, failed, timed_out, cancelled, lost); worker holds it
    or held it; progress (0..1) and message while it reports progress; result once
    finished and not yet consumed (a dict as stored). A delayed task (submitted with delay
    or at, or waiting for a retry): due_ms, when it is due (Unix ms), and try_number, the
    try it waits for (1: the first), with errors, the earlier tries' errors."""

    id: str
    state: str
    worker: Optional[str] = None
    progress: Optional[float] = None
    message: Optional[str] = None
    result: Optional[Dict[str, Any]] = None
    due_ms: Optional[int] = None
    try_number: Optional[int] = None
    errors: Optional[List[Dict[str, Any]]] = None

    @property
    def done(self) -> bool:
        return self.result is not None


class Task:
    """A handle on one submitted task. wait() delivers its result once (it is consumed)."""

    def __init__(self, client: "Client", task_id: str, result: Optional[dict] = None) -> None:
        self.client = client
        self.id = task_id
        self._result = result  # delivered (consumed) already

    def __repr__(self) -> str:
        return f"zkd.Task({self.id!r})"

    def wait(self, timeout: Optional[float] = None, consume: bool = True) -> Any:
        """Waits for the result and returns the task's value; raises TaskFailed (or its
        subclasses TaskTimedOut, TaskCancelled, TaskLost) when it ended otherwise,
        WaitTimeout when `timeout` seconds pass first (the task goes on). The result is
        consumed (once delivered, no one else gets it) unless consume is False. Waiting
        again on a handle that has its result returns it again without a request."""
        if self._result is None:
            self._result = self.client._wait_result(self.id, timeout, consume)
        return _value_of(self.id, self._result)

    def result(self, timeout: Optional[float] = None, consume: bool = True) -> Dict[str, Any]:
        """Like wait(), but returns the result as stored (a dict with "state", "value" or
        "error", "attempt", "worker", ...) whatever its state."""
        if self._result is None:
            self._result = self.client._wait_result(self.id, timeout, consume)
        return self._result

    def status(self) -> TaskStatus:
        """Where the task is now (the result, if there, is shown, not consumed)."""
        return self.client.status(self.id)

    def cancel(self) -> bool:
        """Asks for the task to be cancelled: True when asked, False when it had finished
        already (its result says how). UnknownTask when there is no such task."""
        return self.client.cancel(self.id)


class Workflow:
    """A handle on one workflow (docs/workflows.md). status() reads it as it is now;
    wait() waits for its end; cancel() asks for it to stop. The workflow is a dict as
    GET /v1/workflows/{id} answers: "id", "name", "status" (running, succeeded, failed,
    cancelled), "steps" by name (each with its "status", "tasks", "done", and "value" or
    "error"), and "result" (the values of its sink steps) once it ended."""

    def __init__(self, client: "Client", workflow_id: str, ended: Optional[dict] = None) -> None:
        self.client = client
        self.id = workflow_id
        self._ended = ended  # the workflow as it ended, once seen

    def __repr__(self) -> str:
        return f"zkd.Workflow({self.id!r})"

    def status(self) -> Dict[str, Any]:
        """The workflow now (GET /v1/workflows/{id}); UnknownWorkflow when there is none."""
        return self.client.workflow(self.id)

    def wait(self, timeout: Optional[float] = None) -> Dict[str, Any]:
        """Waits for the workflow to end and returns it (whatever its status: check
        "status"; its "result" holds the sink steps' values). WaitTimeout when `timeout`
        seconds pass first (it goes on); UnknownWorkflow when there is none. Waiting again
        on a handle that saw the end returns it again without a request."""
        if self._ended is None:
            self._ended = self.client._wait_workflow(self.id, timeout)
        return self._ended

    def cancel(self) -> bool:
        """Asks for the workflow to be cancelled (steps not started are cancelled, running
        tasks asked to stop): True when asked (asking twice is fine), False when it had
        ended already. UnknownWorkflow when there is none."""
        if self._ended is not None:
            return False
        return self.client.cancel_workflow(self.id)


def _value_of(task_id: str, result: Dict[str, Any]) -> Any:
    if result.get("state") == "succeeded":
        return result.get("value")
    raise task_failed(task_id, result)


class Client:
    """Talks to one `zkd run --http ADDR` node.

    url: "http://127.0.0.1:8080" (default: $ZKD_URL, else that); token: the bearer token
    (default: $ZKD_HTTP_TOKEN, else the first line of $ZKD_HTTP_TOKEN_FILE, else none);
    timeout: seconds for a request to be answered (a wait adds its own time); ssl_context:
    for https (default: the system's trust store; cafile: a CA file to trust instead).
    Usable from several threads (each has its own connection)."""

    def __init__(
        self,
        url: Optional[str] = None,
        token: Optional[str] = None,
        timeout: float = 30.0,
        *,
        cafile: Optional[str] = None,
        ssl_context: Optional[ssl.SSLContext] = None,
    ) -> None:
        url = url or os.environ.get("ZKD_URL") or "http://127.0.0.1:8080"
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"zkd.Client: {url!r} is not an http:// or https:// URL")
        self.url = url
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._prefix = parts.path.rstrip("/")
        if token is None:
            token = os.environ.get("ZKD_HTTP_TOKEN")
        if token is None and os.environ.get("ZKD_HTTP_TOKEN_FILE"):
            with open(os.environ["ZKD_HTTP_TOKEN_FILE"], encoding="utf-8") as f:
                token = f.readline().strip()
        self._token = token or None
        self.timeout = timeout
        if self._https and ssl_context is None:
            ssl_context = ssl.create_default_context(cafile=cafile)
        self._ssl = ssl_context
        self._local = threading.local()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Closes this thread's connection (a later call opens another)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    # --- tasks -----------------------------------------------------------------------

    def submit(
        self,
        type: str,
        args: Any = None,
        priority: Optional[int] = None,
        timeout: Optional[float] = None,
        max_attempts: Optional[int] = None,
        wait: Optional[float] = None,
        allow_unserved: bool = False,
        *,
        delay: Optional[float] = None,
        at: Union[None, int, str] = None,
        retries: Optional[int] = None,
        backoff: Optional[float] = None,
        backoff_max: Optional[float] = None,
    ) -> Task:
        """Submits one task of `type` with JSON-able `args`: a Task handle.

        priority 0-9 (default 5); timeout: the task's own time limit in seconds (default
        none); max_attempts (default 3); wait: seconds (at most 60) to wait for the result
        in the same request (the handle then holds it when it came in time: its wait()
        returns at once); allow_unserved: submit even when no worker serves the type now (else
        UnservedType). delay (seconds) or at (Unix ms, or an RFC 3339 string): the task
        waits, state "delayed", until then; retries (0-100): tries after a failed or timed
        out one, each after a random wait up to backoff x 2^(k-1) seconds (default 1),
        capped at backoff_max (docs/protocol.md §4.3). Errors: InvalidTask, UnservedType,
        QueueFull, Unauthorized, Unavailable, ApiError."""
        body = _task_body(type, args, priority, timeout, max_attempts, allow_unserved)
        body.update(_delay_fields(delay, at, retries, backoff, backoff_max))
        path = "/v1/tasks"
        extra = 0.0
        if wait is not None:
            extra = min(max(0.0, wait), _WAIT_CHUNK_S)
            path += f"?wait={_ms(extra)}"
        status, answer = self._call("POST", path, body, extra_time=extra, retry=False)
        if status == 200:
            return Task(self, str(answer.get("task")), answer)
        return Task(self, str(answer["id"]))

    def submit_many(
        self, tasks: Iterable[Dict[str, Any]], bundle: Optional[int] = None
    ) -> List[Task]:
        """Submits several tasks in one transaction: each a dict with "type" and optionally
        "args", "priority", "timeout" (seconds), "max_attempts", "allow_unserved". bundle:
        up to this many of one type per node (docs/protocol.md, bundles). Handles in
        order."""
        body = [
            _task_body(
                t["type"],
                t.get("args"),
                t.get("priority"),
                t.get("timeout"),
                t.get("max_attempts"),
                bool(t.get("allow_unserved", False)),
            )
            for t in tasks
        ]
        path = "/v1/tasks" + (f"?bundle={int(bundle)}" if bundle else "")
        _, answer = self._call("POST", path, body, retry=False)
        return [Task(self, str(i)) for i in answer["ids"]]

    def run(self, type: str, args: Any = None, timeout: Optional[float] = None, **kw: Any) -> Any:
        """Submits a task and waits for its value (at most `timeout` seconds, else
        WaitTimeout; the task goes on). Other keywords as submit()."""
        deadline = None if timeout is None else time.monotonic() + timeout
        first = _WAIT_CHUNK_S if timeout is None else min(timeout, _WAIT_CHUNK_S)
        task = self.submit(type, args, wait=first, **kw)
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        return task.wait(timeout=left)

    def task(self, task_id: str) -> Task:
        """A handle on a task submitted before (by any client)."""
        return Task(self, task_id)

    def status(self, task_id: str) -> TaskStatus:
        """Where the task is (GET /v1/tasks/{id}); UnknownTask when there is none."""
        _, a = self._call("GET", f"/v1/tasks/{_quote(task_id)}", task_id=task_id)
        progress = a.get("progress") or {}
        return TaskStatus(
            id=str(a.get("id", task_id)),
            state=str(a.get("state")),
            worker=a.get("worker"),
            progress=progress.get("fraction"),
            message=progress.get("message"),
            result=a.get("result"),
            due_ms=a.get("due_ms"),
            try_number=a.get("try", 1) if a.get("state") == "delayed" else a.get("try"),
            errors=a.get("errors"),
        )

    def cancel(self, task_id: str) -> bool:
        """Asks for the task to be cancelled: True when asked, False when it had finished."""
        try:
            self._call("DELETE", f"/v1/tasks/{_quote(task_id)}", task_id=task_id)
        except ApiError as e:
            if e.status == 404 and e.code == "finished":
                return False
            raise
        return True

    def tasks(self, limit: Optional[int] = None) -> Dict[str, Any]:
        """Pending, running and delayed tasks (as `zkd tasks --json`): {"pending": [...],
        "assigned": [...], "delayed": [...] (each with "due_ms" and "try", soonest first),
        "pending_total", "assigned_total", "delayed_total", "limit", "truncated"}."""
        path = "/v1/tasks" + (f"?limit={int(limit)}" if limit else "")
        return self._call("GET", path)[1]

    def cluster(self) -> Dict[str, Any]:
        """The cluster view (as `zkd cluster --json`): master, workers, counts."""
        return self._call("GET", "/v1/cluster")[1]

    # --- workflows (docs/workflows.md) ---------------------------------------------------

    def run_workflow(
        self,
        spec: Union[Dict[str, Any], str],
        wait: Optional[float] = None,
        allow_unserved: bool = False,
    ) -> Workflow:
        """Submits a workflow: `spec` a dict (or its JSON text) as docs/workflows.md
        describes, {"name": .., "steps": {name: {"type", "args", "after", "map", ...}}}.
        A Workflow handle. wait: seconds (at most 60) to wait for its end in the same
        request (the handle then holds it when it ended in time: its wait() returns at
        once); allow_unserved: submit even when no worker serves a step's type now.
        Errors: InvalidSpec (nothing created), UnservedType, Unauthorized, Unavailable,
        ApiError."""
        text = spec if isinstance(spec, str) else json.dumps(spec, separators=(",", ":"))
        query = []
        extra = 0.0
        if wait is not None:
            extra = min(max(0.0, wait), _WAIT_CHUNK_S)
            query.append(f"wait={_ms(extra)}")
        if allow_unserved:
            query.append("allow_unserved=1")
        path = "/v1/workflows" + ("?" + "&".join(query) if query else "")
        status, answer = self._call("POST", path, _Raw(text), extra_time=extra, retry=False)
        ended = answer if status == 200 and answer.get("status") != "running" else None
        return Workflow(self, str(answer["id"]), ended)

    def workflow(self, workflow_id: str) -> Dict[str, Any]:
        """The workflow now (GET /v1/workflows/{id}); UnknownWorkflow when there is none."""
        return self._call("GET", f"/v1/workflows/{_quote(workflow_id)}")[1]

    def workflow_handle(self, workflow_id: str) -> Workflow:
        """A handle on a workflow submitted before (by any client)."""
        return Workflow(self, workflow_id)

    def cancel_workflow(self, workflow_id: str) -> bool:
        """Asks for the workflow to be cancelled: True when asked (also when asked before),
        False when it had ended. UnknownWorkflow when there is none."""
        now = self.workflow(workflow_id)
        if now.get("status") != "running":
            return False
        self._call("DELETE", f"/v1/workflows/{_quote(workflow_id)}")
        return True

    def workflows(self) -> List[Dict[str, Any]]:
        """Every workflow the cluster keeps, oldest first (as `zkd workflow list --json`):
        each {"id", "name", "status", "steps", "created_ms"}."""
        return list(self._call("GET", "/v1/workflows")[1].get("workflows", []))

    # --- schedules (docs/schedules.md) ---------------------------------------------------

    def add_schedule(
        self,
        name: str,
        type: str,
        args: Any = None,
        *,
        every: Optional[float] = None,
        cron: Optional[str] = None,
        tz: Optional[str] = None,
        priority: Optional[int] = None,
        timeout: Optional[float] = None,
        max_attempts: Optional[int] = None,
        retries: Optional[int] = None,
        misfire: Optional[str] = None,
        no_overlap: bool = False,
        paused: bool = False,
    ) -> Dict[str, Any]:
        """Stores a schedule that submits a task of `type` with `args` at each due time:
        every `every` seconds (at least 1), or at the minutes the cron expression `cron`
        matches, read in time zone `tz` (default UTC). priority, timeout (seconds),
        max_attempts and retries as for submit(); misfire: "once" (default), "skip" or
        "all" (what to do with due times passed while nothing fired them); no_overlap:
        skip a due time while the previous firing has no result; paused: stored without
        firing. The schedule as stored (as schedule() shows it). Errors: InvalidSchedule,
        ScheduleExists (nothing changed), Unauthorized, Unavailable, ApiError."""
        if (every is None) == (cron is None):
            raise ValueError("add_schedule: give every (seconds) or cron, one of them")
        body: Dict[str, Any] = {"name": name}
        body.update(_task_body(type, args, priority, timeout, max_attempts, False))
        if every is not None:
            body["every_ms"] = _ms(every)
        else:
            body["cron"] = cron
            if tz is not None:
                body["tz"] = tz
        if retries is not None:
            body["retries"] = retries
        if misfire is not None:
            body["misfire"] = misfire
        if no_overlap:
            body["no_overlap"] = True
        if paused:
            body["paused"] = True
        return self._call("POST", "/v1/schedules", body, retry=False)[1]

    def schedules(self) -> List[Dict[str, Any]]:
        """Every schedule (as `zkd schedule list --json`'s "schedules"): each as stored,
        with "name", "next_ms" (the next due time, Unix ms; absent while paused), "fired",
        "skipped", "missed", "last_fired_ms", ...; a node that is garbage: {"name",
        "garbage"}."""
        return list(self._call("GET", "/v1/schedules")[1].get("schedules", []))

    def schedule(self, name: str) -> Dict[str, Any]:
        """One schedule as stored; UnknownSchedule when there is none."""
        return self._call("GET", f"/v1/schedules/{_quote(name)}")[1]

    def remove_schedule(self, name: str) -> None:
        """Removes the schedule (the tasks it fired run on); UnknownSchedule when there is
        none."""
        self._call("DELETE", f"/v1/schedules/{_quote(name)}")

    def pause_schedule(self, name: str) -> Dict[str, Any]:
        """Stops the schedule's firings: the schedule as it now is; UnknownSchedule."""
        return self._call("POST", f"/v1/schedules/{_quote(name)}/pause", {})[1]

    def resume_schedule(self, name: str) -> Dict[str, Any]:
        """Starts its firings again (the misfire policy decides what passed meanwhile): the
        schedule as it now is; UnknownSchedule."""
        return self._call("POST", f"/v1/schedules/{_quote(name)}/resume", {})[1]

    # --- the wire --------------------------------------------------------------------

    def _wait_result(self, task_id: str, timeout: Optional[float], consume: bool) -> dict:
        """The task's result, waited for by the server (GET or DELETE
        /v1/tasks/{id}/result?wait=MS), in chunks of at most _WAIT_CHUNK_S."""
        deadline = None if timeout is None else time.monotonic() + timeout
        method = "DELETE" if consume else "GET"
        while True:
            chunk = _WAIT_CHUNK_S
            if deadline is not None:
                chunk = min(chunk, max(0.0, deadline - time.monotonic()))
            path = f"/v1/tasks/{_quote(task_id)}/result?wait={_ms(chunk)}"
            status, answer = self._call(method, path, extra_time=chunk, task_id=task_id)
            if status == 200:
                return answer
            if deadline is not None and time.monotonic() >= deadline:
                state = answer.get("state", "unknown")
                raise WaitTimeout(
                    "wait_timeout",
                    f"task {task_id} has not finished ({state}) after {timeout} s; it goes on",
                    status=status,
                    task_id=task_id,
                )

    def _wait_workflow(self, workflow_id: str, timeout: Optional[float]) -> dict:
        """The workflow once it ended, waited for by the server (GET
        /v1/workflows/{id}?wait=MS), in chunks of at most _WAIT_CHUNK_S."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            chunk = _WAIT_CHUNK_S
            if deadline is not None:
                chunk = min(chunk, max(0.0, deadline - time.monotonic()))
            # wait=0 would answer 200 with the workflow as it is: ask for at least 1 ms.
            path = f"/v1/workflows/{_quote(workflow_id)}?wait={max(1, _ms(chunk))}"
            _, answer = self._call("GET", path, extra_time=chunk)
            if answer.get("status") != "running":
                return answer
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout(
                    "wait_timeout",
                    f"workflow {workflow_id} has not ended after {timeout} s; it goes on",
                    status=202,
                )

    def _conn(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        last = getattr(self._local, "last", 0.0)
        if conn is not None and time.monotonic() - last > _IDLE_REUSE_S:
            conn.close()
            conn = None
        if conn is None:
            if self._https:
                conn = http.client.HTTPSConnection(
                    self._host, self._port, timeout=self.timeout, context=self._ssl
                )
            else:
                conn = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout)
            self._local.conn = conn
            self._local.fresh = True
        return conn

    def _call(
        self,
        method: str,
        path: str,
        body: Any = _UNSET,
        *,
        extra_time: float = 0.0,
        retry: bool = True,
        task_id: Optional[str] = None,
    ) -> "tuple[int, Any]":
        """One request: (status, JSON answer) for 2xx, else the ApiError. A connection that
        was reused and fails before any answer is opened again and the request sent once
        more (for a POST, only when it failed while being sent)."""
        headers = {"Accept": "application/json"}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        data = None
        if isinstance(body, _Raw):
            data = body.text.encode("utf-8")
            headers["Content-Type"] = "application/json"
        elif body is not _UNSET:
            data = json.dumps(body, separators=(",", ":"), allow_nan=False).encode("utf-8")
            headers["Content-Type"] = "application/json"
        for attempt in (1, 2):
            conn = self._conn()
            reused = not getattr(self._local, "fresh", True)
            self._local.fresh = False
            sent = False
            try:
                conn.timeout = self.timeout + extra_time
                if conn.sock is not None:
                    conn.sock.settimeout(conn.timeout)
                conn.request(method, self._prefix + path, body=data, headers=headers)
                sent = True
                resp = conn.getresponse()
                raw = resp.read()
                self._local.last = time.monotonic()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as e:
                self.close()
                if attempt == 1 and reused and (retry or not sent):
                    continue
                raise Unavailable(
                    "connection", f"{method} {self.url}{path}: {e}", task_id=task_id
                ) from e
            except (OSError, http.client.HTTPException) as e:
                self.close()
                raise Unavailable(
                    "connection", f"{method} {self.url}{path}: {e}", task_id=task_id
                ) from e
            if resp.getheader("Connection", "").lower() == "close":
                self.close()
            return self._answer(resp.status, raw, task_id)
        raise AssertionError("unreachable")

    @staticmethod
    def _answer(status: int, raw: bytes, task_id: Optional[str]) -> "tuple[int, Any]":
        try:
            answer = json.loads(raw.decode("utf-8")) if raw else {}
        except ValueError:
            answer = None
        if 200 <= status < 300 and answer is not None:
            return status, answer
        if isinstance(answer, dict) and isinstance(answer.get("error"), dict):
            err = answer["error"]
            raise api_error(
                status,
                str(err.get("code", "error")),
                str(err.get("message", "")),
                task_id=answer.get("id") or task_id,
            )
        text = raw[:200].decode("utf-8", "replace")
        raise ApiError("bad_answer", f"HTTP {status}: {text}", status=status, task_id=task_id)


@dataclass
class _Raw:
    """A request body sent as it is (JSON text the caller wrote)."""

    text: str


def _delay_fields(
    delay: Optional[float],
    at: Union[None, int, str],
    retries: Optional[int],
    backoff: Optional[float],
    backoff_max: Optional[float],
) -> Dict[str, Any]:
    """The fields of POST /v1/tasks for a delayed task and retries (docs/http.md)."""
    if delay is not None and at is not None:
        raise ValueError("submit: give delay or at, not both")
    out: Dict[str, Any] = {}
    if delay is not None:
        out["delay_ms"] = _ms(delay)
    if at is not None:
        out["at"] = at
    if retries is not None:
        out["retries"] = retries
    if backoff is not None:
        out["backoff_ms"] = _ms(backoff)
    if backoff_max is not None:
        out["backoff_max_ms"] = _ms(backoff_max)
    return out


def _task_body(
    type: str,
    args: Any,
    priority: Optional[int],
    timeout: Optional[float],
    max_attempts: Optional[int],
    allow_unserved: bool,
) -> Dict[str, Any]:
    body: Dict[str, Any] = {"type": type}
    if args is not None:
        body["args"] = args
    if priority is not None:
        body["priority"] = priority
    if timeout is not None:
        body["timeout_ms"] = _ms(timeout)
    if max_attempts is not None:
        body["max_attempts"] = max_attempts
    if allow_unserved:
        body["allow_unserved"] = True
    return body


def _quote(task_id: str) -> str:
    return urllib.parse.quote(task_id, safe="")
