# SPDX-License-Identifier: MIT
"""Fixtures: a real ZooKeeper (zkd-zk-local, or $ZKD_TEST_ZK) and real `zkd run --http`
processes. The build's binaries come by environment (ctest sets them): ZKD_BINARY,
ZKD_ZK_LOCAL; the module under test from ZKD_PYTHON_DIR (default: the source tree's)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Iterator, List, Optional

import pytest

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parent.parent
PYTHON_DIR = Path(os.environ.get("ZKD_PYTHON_DIR", SOURCE / "python"))
EXAMPLES = SOURCE / "examples" / "python"
sys.path.insert(0, str(PYTHON_DIR))

import zkd  # noqa: E402


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "serve_e2e: end to end with `zkd run` serve mode (real zkd, real ZooKeeper)"
    )


def _required() -> bool:
    """A missing ZooKeeper or binary fails (CI, the test command) rather than skips."""
    return os.environ.get("ZKD_REQUIRE_ZK") == "1" or os.environ.get("CI") == "true"


def _missing(what: str) -> None:
    if _required():
        pytest.fail(f"needed (ZKD_REQUIRE_ZK=1 or CI=true): {what}")
    pytest.skip(f"needs {what}")


def zkd_env(extra: Optional[dict] = None) -> dict:
    """The environment of a `zkd run`: the tests' own ZKD_* variables left out (zkd warns
    about every ZKD_ variable that is none of its options)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZKD_")}
    env.update(extra or {})
    return env


def binary(name: str, env: str) -> str:
    path = os.environ.get(env)
    if not path or not os.access(path, os.X_OK):
        _missing(f"{name} (set {env} to the built binary)")
    return path  # type: ignore[return-value]


@pytest.fixture(scope="session")
def zk_connect(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    external = os.environ.get("ZKD_TEST_ZK")
    if external:
        yield external
        return
    zk_local = binary("zkd-zk-local", "ZKD_ZK_LOCAL")
    log = tmp_path_factory.mktemp("zk") / "start.err"
    with open(log, "w") as err:
        started = subprocess.run(
            [zk_local, "start", "--tick-ms", "200"],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            timeout=120,
        )
    text = log.read_text()
    if started.returncode != 0:
        _missing(f"a local ZooKeeper (zkd-zk-local start failed: {text[-2000:]})")
    connect = started.stdout.splitlines()[0].strip()
    found = re.search(r"dir: (\S+)", text)
    assert found, text
    try:
        yield connect
    finally:
        subprocess.run([zk_local, "stop", "--dir", found.group(1)], timeout=60, check=False)


class Node:
    """One `zkd run --http 127.0.0.1:0` process; url once it serves."""

    def __init__(self, zk: str, ns: str, workdir: Path, extra: List[str], env: dict) -> None:
        self.zk = zk
        self.ns = ns
        self.log = workdir / f"zkd-{uuid.uuid4().hex[:8]}.log"
        cmd = [
            binary("zkd", "ZKD_BINARY"),
            "run",
            "--zk",
            zk,
            "--namespace",
            ns,
            "--http",
            "127.0.0.1:0",
            *([] if "--capacity" in extra else ["--capacity", "4"]),
            "--session-timeout",
            "4s",
            "--grace",
            "2s",
            *extra,
        ]
        self._err = open(self.log, "w")
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=self._err, stderr=subprocess.STDOUT, env=env
        )
        self.url = self._wait_for_url()

    def _wait_for_url(self) -> str:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = re.search(r"HTTP API on (https?://[^/\s]+)/", self.log.read_text())
            if found:
                return found.group(1)
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"zkd run did not serve HTTP: {self.log.read_text()[-3000:]}")

    def wait_ready(self, client: "zkd.Client", types: Optional[List[str]] = None) -> None:
        """Until the cluster has a master and a worker (serving `types`)."""
        deadline = time.monotonic() + 60
        view = None
        while time.monotonic() < deadline:
            try:
                view = client.cluster()
                served = {t for w in view.get("workers", []) for t in w.get("types", [])}
                if view.get("master") and view.get("workers") and set(types or []) <= served:
                    return
            except zkd.Unavailable:
                pass
            time.sleep(0.1)
        raise AssertionError(f"no master and worker within 60 s: {view}; {self.logs()}")

    def logs(self) -> str:
        return self.log.read_text()[-4000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._err.close()


@pytest.fixture
def start_node(zk_connect: str, tmp_path: Path):
    """start_node(*flags, ns=None, env=None) -> Node; stopped after the test."""
    nodes: List[Node] = []

    def start(*extra: str, ns: Optional[str] = None, env: Optional[dict] = None) -> Node:
        node = Node(
            zk_connect,
            ns or f"py{uuid.uuid4().hex[:10]}",
            tmp_path,
            list(extra),
            zkd_env(env),
        )
        nodes.append(node)
        return node

    yield start
    for n in nodes:
        n.stop()


@pytest.fixture(scope="module")
def node(zk_connect: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    """A node shared by a module's tests (the built-in types), ready."""
    n = Node(
        zk_connect,
        f"py{uuid.uuid4().hex[:10]}",
        tmp_path_factory.mktemp("node"),
        [],
        zkd_env(),
    )
    with zkd.Client(n.url) as c:
        n.wait_ready(c)
    yield n
    n.stop()


@pytest.fixture
def client(node: Node) -> Iterator["zkd.Client"]:
    with zkd.Client(node.url, timeout=30) as c:
        yield c


def example_env() -> dict:
    """What an example program needs to import zkd when zkd runs it (exec types get an
    empty environment but for the listed variables)."""
    return {"PYTHONPATH": str(PYTHON_DIR)}
