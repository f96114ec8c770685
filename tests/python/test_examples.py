# SPDX-License-Identifier: MIT
"""examples/python/ under a real `zkd run`: the served types as one-shot exec types, in serve
mode (marker serve_e2e), and the client script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import zkd
from conftest import EXAMPLES, PYTHON_DIR

PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
TYPES = {"served_echo": "served_echo.py", "primes": "served_primes.py"}


def config(tmp_path: Path) -> Path:
    """A config file giving the examples' programs PYTHONPATH (an exec program's
    environment is empty but for what its type's `env` setting names)."""
    path = tmp_path / "zkd.conf"
    lines = [f"exec.{name}.env = PYTHONPATH={PYTHON_DIR}" for name in TYPES]
    path.write_text("\n".join(lines) + "\n")
    return path


def program(name: str) -> str:
    return f"{name}={PYTHON} {EXAMPLES / TYPES[name]}"


def start(start_node, tmp_path: Path, flag: str):
    args = ["--config", str(config(tmp_path))]
    for name in TYPES:
        args += [flag, program(name)]
    node = start_node(*args)
    c = zkd.Client(node.url)
    node.wait_ready(c, list(TYPES))
    return node, c


def wait_for_progress(task: zkd.Task, timeout: float = 60) -> zkd.TaskStatus:
    deadline = time.monotonic() + timeout
    st = task.status()
    while st.progress is None and time.monotonic() < deadline:
        time.sleep(0.1)
        st = task.status()
    return st


def check_served_types(c: zkd.Client, serve_mode: bool) -> None:
    assert c.run("served_echo", {"a": [1, "two", None]}, timeout=60) == {"a": [1, "two", None]}
    assert c.run("served_echo", "héllo ✓", timeout=60) == "héllo ✓"
    assert c.run("primes", {"below": 100}, timeout=60) == {"below": 100, "count": 25}

    # Progress, as the status shows it.
    slow = c.submit("primes", {"below": 100_000_000, "chunk": 20_000})
    st = wait_for_progress(slow)
    assert st.state == "running" and 0 <= st.progress <= 1
    assert "primes below" in st.message
    # A cancel stops it (serve mode: zkd.Cancelled at its next progress report).
    assert slow.cancel() is True
    with pytest.raises(zkd.TaskCancelled):
        slow.wait(timeout=60)

    # A handler's error: in serve mode with its code; one-shot programs carry no code.
    with pytest.raises(zkd.TaskFailed) as e:
        c.run("primes", {"below": 1}, timeout=60)
    assert "below must be from 2" in e.value.message
    assert e.value.code == ("bad_args" if serve_mode else "handler_error")


def test_examples_as_one_shot_exec_types(start_node, tmp_path):
    _, c = start(start_node, tmp_path, "--exec")
    check_served_types(c, serve_mode=False)


@pytest.mark.serve_e2e
def test_examples_in_serve_mode(start_node, tmp_path):
    _, c = start(start_node, tmp_path, "--serve")
    check_served_types(c, serve_mode=True)
    # Task after task on warm processes, each answered with its own args.
    values = [c.run("served_echo", i, timeout=60) for i in range(20)]
    assert values == list(range(20))


def test_the_client_script(node):
    def run(*args: str) -> subprocess.CompletedProcess:
        env = dict(os.environ, PYTHONPATH=str(PYTHON_DIR))
        return subprocess.run(
            [PYTHON, str(EXAMPLES / "client.py"), "--url", node.url, *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )

    ok = run("sum", "[1, 2, 3]", "--timeout", "60")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout) == {"sum": 6}
    assert "submitted t" in ok.stderr
    failed = run("fail", '"nope"', "--timeout", "60")
    assert failed.returncode == 1 and "failed: handler_error" in failed.stderr
    refused = run("no_such_type", "{}")
    assert refused.returncode == 3 and "unserved_type (409)" in refused.stderr
    late = run("sleep", '{"ms": 60000}', "--timeout", "0.2")
    assert late.returncode == 4 and "it goes on" in late.stderr
    usage = run("echo", "{not json")
    assert usage.returncode == 2


def test_the_workflow_script(node):
    env = dict(os.environ, PYTHONPATH=str(PYTHON_DIR))
    ok = subprocess.run(
        [PYTHON, str(EXAMPLES / "workflow.py"), "--url", node.url, "3", "4", "5", "--timeout", "60"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout) == {"total": {"sum": 12}}
    assert "submitted wf-" in ok.stderr
