# SPDX-License-Identifier: MIT
"""The serve loop (zkd.serve) driven over pipes, as zkd drives it: frames in on stdin,
frames out on stdout. No zkd needed: a real child process runs a served program."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

HERE = Path(__file__).resolve().parent
PYTHON_DIR = Path(os.environ.get("ZKD_PYTHON_DIR", HERE.parent.parent / "python"))


class Program:
    """A served program in a child process, with helpers to talk frames to it."""

    def __init__(self, tmp_path: Path, source: str) -> None:
        path = tmp_path / "prog.py"
        path.write_text(textwrap.dedent(source))
        env = dict(os.environ, PYTHONPATH=str(PYTHON_DIR), ZKD_SERVE="1")
        self.proc = subprocess.Popen(
            [sys.executable, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
            bufsize=1,
        )
        self.stderr: List[str] = []
        self._err = threading.Thread(target=self._drain, daemon=True)
        self._err.start()

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    def send(self, frame: Any) -> None:
        assert self.proc.stdin is not None
        line = frame if isinstance(frame, str) else json.dumps(frame)
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def frame(self, timeout: float = 20.0) -> Dict[str, Any]:
        """The next frame (every line on stdout must be one JSON object)."""
        assert self.proc.stdout is not None
        result: List[str] = []
        reader = threading.Thread(target=lambda: result.append(self.proc.stdout.readline()))
        reader.daemon = True
        reader.start()
        reader.join(timeout)
        assert result, f"no frame within {timeout} s; stderr: {''.join(self.stderr)}"
        line = result[0]
        assert line.endswith("\n"), f"stdout ended: {line!r}; stderr: {''.join(self.stderr)}"
        value = json.loads(line)
        assert isinstance(value, dict) and "op" in value, line
        return value

    def frames_until(self, op: str) -> List[Dict[str, Any]]:
        out = []
        while True:
            f = self.frame()
            out.append(f)
            if f["op"] == op or f["op"] in ("result", "error"):
                return out

    def task(self, tid: str, args: Any, type: str = "t", **extra: Any) -> None:
        frame = {"op": "task", "id": tid, "attempt": 1, "epoch": 7, "type": type, "args": args}
        frame.update({"deadline_ms": 0}, **extra)
        self.send(frame)

    def close(self, timeout: float = 20.0) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        rc = self.proc.wait(timeout)
        self._err.join(5)
        return rc

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def program(tmp_path: Path):
    made: List[Program] = []

    def make(source: str) -> Program:
        p = Program(tmp_path, source)
        made.append(p)
        return p

    yield make
    for p in made:
        p.kill()


def test_ready_then_result_then_clean_exit_on_eof(program):
    p = program(
        """
        import zkd

        @zkd.task("t")
        def t(args):
            return {"got": args}

        zkd.serve()
        print("after serve: stdout is back", flush=True)
        """
    )
    assert p.frame() == {"op": "ready", "protocol": 1}
    p.task("t5-1", {"x": [1, 2]})
    assert p.frame() == {"op": "result", "id": "t5-1", "value": {"got": {"x": [1, 2]}}}
    p.task("t5-2", None)
    assert p.frame() == {"op": "result", "id": "t5-2", "value": {"got": None}}
    assert p.close() == 0
    # serve() returned on EOF and gave stdout back to the program.
    assert p.proc.stdout.read() == "after serve: stdout is back\n"


def test_print_and_child_processes_go_to_stderr_not_into_frames(program):
    p = program(
        """
        import os, subprocess, sys, zkd

        @zkd.task("t")
        def t(args):
            print("printed by the task")
            sys.stdout.write("written to sys.stdout\\n")
            os.write(1, b"written to fd 1\\n")
            subprocess.run(["echo", "from a child"], check=True)
            return 42

        zkd.serve()
        """
    )
    assert p.frame()["op"] == "ready"
    p.task("a", None)
    assert p.frame() == {"op": "result", "id": "a", "value": 42}
    assert p.close() == 0
    err = "".join(p.stderr)
    for text in ("printed by the task", "written to sys.stdout", "written to fd 1", "from a child"):
        assert text in err


def test_progress_log_and_context(program):
    p = program(
        """
        import logging, zkd

        @zkd.task("t")
        def t(args):
            ctx = zkd.task_context()
            zkd.progress(0.25)
            zkd.progress(0.5, "half")
            zkd.progress(7)  # clamped
            logging.getLogger("app").info("info line")
            logging.getLogger("app").warning("careful")
            logging.getLogger("app").error("bad")
            logging.getLogger("app").debug("not shown at the default level")
            return {"id": ctx.id, "attempt": ctx.attempt, "epoch": ctx.epoch,
                    "deadline": ctx.deadline, "type": ctx.type}

        zkd.serve()
        """
    )
    assert p.frame()["op"] == "ready"
    p.task("t9-1", None, attempt=2, epoch=42, deadline_ms=1_900_000_000_123)
    frames = p.frames_until("result")
    assert frames == [
        {"op": "progress", "id": "t9-1", "fraction": 0.25},
        {"op": "progress", "id": "t9-1", "fraction": 0.5, "message": "half"},
        {"op": "progress", "id": "t9-1", "fraction": 1.0},
        {"op": "log", "level": "info", "message": "app: info line"},
        {"op": "log", "level": "warn", "message": "app: careful"},
        {"op": "log", "level": "error", "message": "app: bad"},
        {
            "op": "result",
            "id": "t9-1",
            "value": {
                "id": "t9-1",
                "attempt": 2,
                "epoch": 42,
                "deadline": 1_900_000_000.123,
                "type": "t",
            },
        },
    ]
    assert p.close() == 0


def test_errors_become_error_frames(program):
    p = program(
        """
        import zkd

        @zkd.task("t")
        def t(args):
            if args == "code":
                raise zkd.TaskError("no such image", code="not_found")
            if args == "plain":
                raise zkd.TaskError("plain failure")
            if args == "value":
                return {"not json": {1, 2}}
            if args == "nan":
                return float("nan")
            raise KeyError("missing")

        zkd.serve()
        """
    )
    assert p.frame()["op"] == "ready"
    p.task("1", "code")
    assert p.frame() == {"op": "error", "id": "1", "message": "no such image", "code": "not_found"}
    p.task("2", "plain")
    assert p.frame() == {"op": "error", "id": "2", "message": "plain failure"}
    p.task("3", "boom")
    assert p.frame() == {"op": "error", "id": "3", "message": "KeyError: 'missing'"}
    p.task("4", "value")
    f = p.frame()
    assert f["op"] == "error" and f["id"] == "4" and "not JSON" in f["message"]
    p.task("5", "nan")
    f = p.frame()
    assert f["op"] == "error" and f["id"] == "5" and "not JSON" in f["message"]
    assert p.close() == 0


def test_task_error_refuses_a_bad_code():
    sys.path.insert(0, str(PYTHON_DIR))
    import zkd

    with pytest.raises(ValueError):
        zkd.TaskError("x", code="Not-A-Code")
    assert zkd.TaskError("x", code="ok_1").code == "ok_1"


def test_dispatch_by_type_and_unknown_type(program):
    p = program(
        """
        import zkd

        @zkd.task("up")
        def up(args):
            return args.upper()

        @zkd.task
        def down(args):
            return args.lower()

        zkd.serve()
        """
    )
    assert p.frame()["op"] == "ready"
    p.task("1", "Ab", type="up")
    assert p.frame() == {"op": "result", "id": "1", "value": "AB"}
    p.task("2", "Ab", type="down")
    assert p.frame() == {"op": "result", "id": "2", "value": "ab"}
    p.task("3", "Ab", type="sideways")
    f = p.frame()
    assert f["op"] == "error" and "sideways" in f["message"] and "down, up" in f["message"]
    assert p.close() == 0


def test_cancel_raises_cancelled_at_progress_and_checkpoint(program):
    p = program(
        """
        import time, zkd

        @zkd.task("t")
        def t(args):
            zkd.progress(0.1, "started")
            while not zkd.cancelled():
                time.sleep(0.01)
            if args == "checkpoint":
                zkd.checkpoint()
            try:
                zkd.progress(0.2)
            except Exception:
                return "Cancelled must not be caught by except Exception"
            return "not reached"

        zkd.serve()
        """
    )
    assert p.frame()["op"] == "ready"
    for tid, how in (("c1", "progress"), ("c2", "checkpoint")):
        p.task(tid, how)
        assert p.frame() == {"op": "progress", "id": tid, "fraction": 0.1, "message": "started"}
        p.send({"op": "cancel", "id": "someone-else"})  # not in flight: ignored
        p.send({"op": "cancel", "id": tid})
        assert p.frame() == {"op": "error", "id": tid, "code": "cancelled", "message": "cancelled"}
    # The next task starts uncancelled.
    p.send({"op": "task", "id": "c3", "type": "t", "args": None, "attempt": 1, "epoch": 1})
    assert p.frame()["op"] == "progress"
    p.send({"op": "cancel", "id": "c3"})
    assert p.frame()["op"] == "error"
    assert p.close() == 0


def test_eof_finishes_the_task_in_flight_then_exits(program):
    p = program(
        """
        import time, zkd

        @zkd.task("t")
        def t(args):
            time.sleep(0.3)
            return "finished"

        zkd.serve()
        """
    )
    assert p.frame()["op"] == "ready"
    p.task("e1", None)
    time.sleep(0.05)
    p.proc.stdin.close()  # zkd asks it to exit: it answers the task first
    assert p.frame() == {"op": "result", "id": "e1", "value": "finished"}
    assert p.proc.wait(20) == 0


def test_garbage_and_unknown_frames_are_ignored(program):
    p = program(
        """
        import zkd

        @zkd.task("t")
        def t(args):
            return args

        zkd.serve()
        """
    )
    assert p.frame()["op"] == "ready"
    p.send("not json at all")
    p.send("[1, 2]")
    p.send({"op": "future-op", "x": 1})
    p.send({"op": "task", "type": "t"})  # no id
    p.task("g1", "ok", unknown_member=True)
    assert p.frame() == {"op": "result", "id": "g1", "value": "ok"}
    assert p.close() == 0
    err = "".join(p.stderr)
    assert "not JSON" in err and "not an object" in err and "without an id" in err


def test_unicode_args_and_values(program):
    p = program(
        """
        import zkd

        @zkd.task("t")
        def t(args):
            return args + " ✓"

        zkd.serve()
        """
    )
    assert p.frame()["op"] == "ready"
    p.task("u", "héllo\nwörld")
    assert p.frame() == {"op": "result", "id": "u", "value": "héllo\nwörld ✓"}
    assert p.close() == 0


def test_helpers_outside_serve_do_nothing():
    sys.path.insert(0, str(PYTHON_DIR))
    import zkd

    assert zkd.task_context() is None
    assert zkd.cancelled() is False
    zkd.progress(0.5, "no-op")
    zkd.checkpoint()
    with pytest.raises(ValueError):
        zkd.task("bad name!")
    with pytest.raises(ValueError):
        zkd.serve({})


def test_serve_in_process_over_pipes():
    """serve() with explicit streams: no fd games, returns at the end of the input."""
    import io

    sys.path.insert(0, str(PYTHON_DIR))
    import zkd

    inp = io.StringIO(
        json.dumps({"op": "task", "id": "p1", "type": "double", "args": 21, "attempt": 1, "epoch": 3})
        + "\n"
    )
    out = io.StringIO()
    zkd.serve({"double": lambda a: a * 2}, stdin=inp, stdout=out)
    lines = [json.loads(l) for l in out.getvalue().splitlines()]
    assert lines == [{"op": "ready", "protocol": 1}, {"op": "result", "id": "p1", "value": 42}]
    assert zkd.task_context() is None
