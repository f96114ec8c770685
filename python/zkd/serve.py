# SPDX-License-Identifier: MIT
"""The program side of exec serve mode (docs/exec.md, "Serve mode"): a long-lived program
that zkd starts once and hands tasks to, one at a time, as JSON lines on stdin, and that
answers on stdout.

    import zkd

    @zkd.task("resize")
    def resize(args):
        zkd.progress(0.5, "halfway")
        return {"ok": True}

    zkd.serve()
"""

from __future__ import annotations

import json
import logging
import os
import queue
import re
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, IO, Optional

PROTOCOL = 1

_TYPE_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
_ERROR_CODE = re.compile(r"[a-z0-9_]{1,64}")

_handlers: Dict[str, Callable[[Any], Any]] = {}


class TaskError(Exception):
    """Raise it in a task to fail it with a message and, optionally, an error code (a word
    of [a-z0-9_], 1 to 64; default handler_error), which the result carries."""

    def __init__(self, message: str, code: Optional[str] = None) -> None:
        super().__init__(message)
        if code is not None and not _ERROR_CODE.fullmatch(code):
            raise ValueError(f"zkd.TaskError: {code!r} is not an error code ([a-z0-9_]{{1,64}})")
        self.message = message
        self.code = code


class Cancelled(BaseException):
    """Raised in a task that zkd cancelled (or timed out), by progress() and checkpoint().
    A BaseException, as asyncio's CancelledError, so that `except Exception` in the task
    does not swallow it; let it propagate (cleanup in `finally` runs)."""


@dataclass(frozen=True)
class TaskContext:
    """The task in flight: id (a bundled task's "<bundle id>.<index>"), attempt (1 on the
    first run), epoch (the assignment's epoch: the fencing token, to pass to any system
    that must refuse a stale writer), deadline (Unix time in seconds when zkd times the
    task out, None for none), type."""

    id: str
    attempt: int
    epoch: int
    deadline: Optional[float]
    type: str

    def remaining(self) -> Optional[float]:
        """Seconds left before the deadline (may be negative), None without one."""
        return None if self.deadline is None else self.deadline - time.time()


def task(name: Optional[str] = None) -> Callable[[Callable[[Any], Any]], Callable[[Any], Any]]:
    """Registers the decorated function as the handler of task type `name` (default: the
    function's name) for serve(). The function gets the task's args (any JSON value) and
    returns its value (anything json.dumps takes); an exception fails the task."""

    def register(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
        type_name = name if name is not None else fn.__name__
        if not _TYPE_NAME.fullmatch(type_name):
            raise ValueError(
                f"zkd.task: {type_name!r} is not a task type name (1-128 of A-Z a-z 0-9 _ . : -)"
            )
        _handlers[type_name] = fn
        return fn

    if callable(name):  # @zkd.task without parentheses
        fn, name = name, None
        return register(fn)  # type: ignore[return-value]
    if name is not None and not _TYPE_NAME.fullmatch(name):
        raise ValueError(f"zkd.task: {name!r} is not a task type name (1-128 of A-Z a-z 0-9 _ . : -)")
    return register


class _Server:
    """One serve() loop: a reader thread turns stdin's lines into events; the calling
    thread runs the tasks; frames to zkd are written under a lock (a task may report
    progress from several threads)."""

    def __init__(self, handlers: Dict[str, Callable[[Any], Any]], inp: IO[str], out: IO[str]):
        self.handlers = handlers
        self.inp = inp
        self.out = out
        self.lock = threading.Lock()
        self.events: "queue.Queue[Optional[dict]]" = queue.Queue()
        self.current: Optional[TaskContext] = None
        self.cancel = threading.Event()

    def send(self, frame: Dict[str, Any]) -> None:
        line = json.dumps(frame, separators=(",", ":"), allow_nan=False)
        with self.lock:
            self.out.write(line + "\n")
            self.out.flush()

    def read(self) -> None:
        """The reader thread: task frames to the queue, cancels flagged at once, None at
        the end of stdin."""
        try:
            for line in self.inp:
                line = line.strip()
                if not line:
                    continue
                try:
                    frame = json.loads(line)
                except ValueError:
                    _stderr(f"zkd.serve: ignored a line that is not JSON: {line[:200]!r}")
                    continue
                if not isinstance(frame, dict):
                    _stderr(f"zkd.serve: ignored a frame that is not an object: {line[:200]!r}")
                    continue
                op = frame.get("op")
                if op == "cancel":
                    cur = self.current
                    if cur is not None and frame.get("id") == cur.id:
                        self.cancel.set()
                    else:
                        _stderr(f"zkd.serve: ignored a cancel of {frame.get('id')!r}, not in flight")
                elif op == "task":
                    self.events.put(frame)
                # other ops: room to grow, ignored
        except (OSError, ValueError) as e:  # stdin closed under us
            _stderr(f"zkd.serve: stdin: {e}")
        finally:
            self.events.put(None)

    def run_task(self, frame: Dict[str, Any]) -> None:
        tid = frame.get("id")
        if not isinstance(tid, str):
            _stderr(f"zkd.serve: ignored a task frame without an id: {frame!r:.200}")
            return
        type_name = str(frame.get("type", ""))
        deadline_ms = frame.get("deadline_ms") or 0
        ctx = TaskContext(
            id=tid,
            attempt=int(frame.get("attempt") or 0),
            epoch=int(frame.get("epoch") or 0),
            deadline=deadline_ms / 1000.0 if deadline_ms else None,
            type=type_name,
        )
        fn = self.handlers.get(type_name)
        if fn is None and len(self.handlers) == 1 and not type_name:
            fn = next(iter(self.handlers.values()))
        self.cancel.clear()
        self.current = ctx
        try:
            if fn is None:
                known = ", ".join(sorted(self.handlers)) or "none"
                self.send(
                    {
                        "op": "error",
                        "id": tid,
                        "message": f"this program serves no task type '{type_name}' "
                        f"(it serves: {known})",
                    }
                )
                return
            try:
                value = fn(frame.get("args"))
                line = {"op": "result", "id": tid, "value": value}
                try:
                    self.send(line)
                except (TypeError, ValueError) as e:
                    self.send(
                        {"op": "error", "id": tid, "message": f"the value is not JSON: {e}"}
                    )
            except Cancelled:
                self.send({"op": "error", "id": tid, "code": "cancelled", "message": "cancelled"})
            except TaskError as e:
                err = {"op": "error", "id": tid, "message": e.message}
                if e.code:
                    err["code"] = e.code
                self.send(err)
            except Exception as e:  # noqa: BLE001 -- a task's failure, reported
                logging.getLogger("zkd").debug("task %s failed", tid, exc_info=True)
                self.send({"op": "error", "id": tid, "message": f"{type(e).__name__}: {e}"})
        finally:
            self.current = None
            self.cancel.clear()

    def loop(self) -> None:
        self.send({"op": "ready", "protocol": PROTOCOL})
        reader = threading.Thread(target=self.read, name="zkd-serve-stdin", daemon=True)
        reader.start()
        while True:
            frame = self.events.get()
            if frame is None:
                return
            self.run_task(frame)


class _LogFrames(logging.Handler):
    """The logging module's records as "log" frames while a task runs; to stderr between
    tasks (zkd logs a program's stderr too)."""

    LEVELS = {"DEBUG": "debug", "INFO": "info", "WARNING": "warn", "ERROR": "error"}

    def __init__(self, server: _Server) -> None:
        super().__init__()
        self.server = server
        self.setFormatter(logging.Formatter("%(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
            if self.server.current is None:
                _stderr(f"{record.levelname.lower()}: {text}")
                return
            level = self.LEVELS.get(record.levelname, "error" if record.levelno > 40 else "info")
            self.server.send({"op": "log", "level": level, "message": text})
        except Exception:  # noqa: BLE001 -- logging must never fail the task
            self.handleError(record)


_server: Optional[_Server] = None
_real_stderr = sys.stderr


def _stderr(text: str) -> None:
    try:
        _real_stderr.write(text + "\n")
        _real_stderr.flush()
    except (OSError, ValueError):
        pass


def serve(
    handlers: Optional[Dict[str, Callable[[Any], Any]]] = None,
    *,
    stdin: Optional[IO[str]] = None,
    stdout: Optional[IO[str]] = None,
) -> None:
    """Serves the task types registered with @zkd.task (or `handlers`, type -> function)
    until zkd closes stdin: says "ready", then runs each task it is handed and answers it.
    Returns when stdin ends (after answering the task in flight).

    While it runs, sys.stdout is sys.stderr (print() goes to the worker's log, not into
    the frames), and so is file descriptor 1 for child processes, unless `stdout` is given;
    the logging module's records become "log" frames. stdin and stdout (text streams)
    replace the process's own: for tests."""
    global _server
    table = dict(handlers if handlers is not None else _handlers)
    if not table:
        raise ValueError("zkd.serve: no task type registered (@zkd.task(\"name\"))")
    for name in table:
        if not _TYPE_NAME.fullmatch(name):
            raise ValueError(f"zkd.serve: {name!r} is not a task type name")
    if stdin is None and stdout is None and os.environ.get("ZKD_SERVE") != "1":
        sys.exit(_one_shot(table))
    saved_stdout = sys.stdout
    saved_fd = None
    if stdout is None:
        # Frames go to a private copy of fd 1; fd 1 itself becomes stderr, for print(),
        # C code and child processes alike.
        sys.stdout.flush()
        saved_fd = os.dup(1)
        out: IO[str] = os.fdopen(os.dup(1), "w", encoding="utf-8", newline="\n")
        os.dup2(2, 1)
    else:
        out = stdout
    inp = stdin if stdin is not None else sys.stdin
    server = _Server(table, inp, out)
    handler = _LogFrames(server)
    root = logging.getLogger()
    old_level = root.level
    if not root.handlers and root.level == logging.WARNING:
        root.setLevel(logging.INFO)
    root.addHandler(handler)
    sys.stdout = sys.stderr
    _server = server
    try:
        server.loop()
    except BrokenPipeError:
        _stderr("zkd.serve: stdout closed (zkd went away); exiting")
    finally:
        _server = None
        sys.stdout = saved_stdout
        root.removeHandler(handler)
        root.setLevel(old_level)
        if saved_fd is not None:
            try:
                out.close()
            except OSError:
                pass
            os.dup2(saved_fd, 1)
            os.close(saved_fd)


class _OneShot(_Server):
    """A program run by a one-shot exec type (`zkd run --exec`): one task, args on stdin,
    the value on stdout, progress on fd 3 (docs/exec.md, "The contract with the program")."""

    def __init__(self, handlers: Dict[str, Callable[[Any], Any]]) -> None:
        super().__init__(handlers, sys.stdin, sys.stdout)
        self.failed = False
        try:
            self.progress_out: Optional[IO[str]] = os.fdopen(
                int(os.environ.get("ZKD_PROGRESS_FD", "3")), "w", encoding="utf-8"
            )
        except (OSError, ValueError):
            self.progress_out = None  # run by hand: no fd 3

    def send(self, frame: Dict[str, Any]) -> None:
        op = frame.get("op")
        if op == "progress":
            line = {"progress": frame["fraction"]}
            if "message" in frame:
                line["message"] = frame["message"]
            if self.progress_out is not None:
                try:
                    with self.lock:
                        self.progress_out.write(json.dumps(line) + "\n")
                        self.progress_out.flush()
                except OSError:
                    self.progress_out = None
        elif op == "log":
            _stderr(f"{frame['level']}: {frame['message']}")
        elif op == "result":
            text = json.dumps(frame["value"], separators=(",", ":"), allow_nan=False)
            self.out.write(text + "\n")
            self.out.flush()
        elif op == "error":
            code = frame.get("code")
            _stderr(f"{code + ': ' if code else ''}{frame['message']}")
            self.failed = True


def _one_shot(table: Dict[str, Callable[[Any], Any]]) -> int:
    """One task as a one-shot exec program: the exit code (0: succeeded)."""
    global _server
    type_name = os.environ.get("ZKD_TASK_TYPE", "")
    if not type_name and len(table) == 1:
        type_name = next(iter(table))
    text = sys.stdin.read()
    try:
        args = json.loads(text) if text.strip() else None
    except ValueError as e:
        _stderr(f"zkd.serve: the args on stdin are not JSON: {e}")
        return 2
    server = _OneShot(table)
    handler = _LogFrames(server)
    root = logging.getLogger()
    if not root.handlers and root.level == logging.WARNING:
        root.setLevel(logging.INFO)
    root.addHandler(handler)
    real_stdout = sys.stdout
    sys.stdout = sys.stderr
    _server = server
    try:
        server.run_task(
            {
                "id": os.environ.get("ZKD_TASK_ID", "by-hand"),
                "type": type_name,
                "args": args,
                "attempt": 1,
                "epoch": 0,
            }
        )
    finally:
        _server = None
        sys.stdout = real_stdout
        root.removeHandler(handler)
    return 1 if server.failed else 0


def task_context() -> Optional[TaskContext]:
    """The task in flight (in serve()), else None."""
    s = _server
    return s.current if s is not None else None


def cancelled() -> bool:
    """Whether zkd asked to stop the task in flight (a cancel or its timeout). False
    outside serve()."""
    s = _server
    return s is not None and s.current is not None and s.cancel.is_set()


def checkpoint() -> None:
    """Raises Cancelled when zkd asked to stop the task in flight."""
    if cancelled():
        raise Cancelled()


def progress(fraction: float, message: Optional[str] = None) -> None:
    """Reports the task's progress: fraction from 0 to 1 (clamped), with an optional
    message; shown by `zkd status`, the HTTP API and the status page. Raises Cancelled
    when the task was cancelled. Does nothing outside serve() (so that a handler can be
    called directly, in a test)."""
    s = _server
    if s is None or s.current is None:
        return
    if s.cancel.is_set():
        raise Cancelled()
    f = float(fraction)
    if f != f:  # NaN
        raise ValueError("zkd.progress: the fraction is NaN")
    frame: Dict[str, Any] = {"op": "progress", "id": s.current.id, "fraction": min(1.0, max(0.0, f))}
    if message is not None:
        frame["message"] = str(message)
    s.send(frame)
