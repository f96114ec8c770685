# SPDX-License-Identifier: MIT
"""zkd.Client against a real `zkd run --http` node and a real ZooKeeper: every call."""

from __future__ import annotations

import socket
import subprocess
import threading
import time

import pytest

import zkd
from zkd import client as client_module


def test_submit_and_wait(client):
    task = client.submit("echo", {"x": [1, 2, 3]})
    assert isinstance(task, zkd.Task)
    assert task.id.startswith("t")
    assert task.wait(timeout=30) == {"x": [1, 2, 3]}
    # The handle keeps what it delivered; the server consumed it.
    assert task.wait() == {"x": [1, 2, 3]}
    with pytest.raises(zkd.UnknownTask) as e:
        client.status(task.id)
    assert e.value.status == 404 and e.value.code == "unknown_task"


def test_submit_with_wait_delivers_in_the_same_request(client):
    task = client.submit("sum", [1, 2, 3], priority=9, wait=30)
    assert task._result is not None  # came with the submit's answer
    assert task.wait() == {"sum": 6}
    assert task.result()["state"] == "succeeded"


def test_submit_with_a_wait_that_runs_out_keeps_the_id(client):
    task = client.submit("sleep", {"ms": 60000}, wait=0.1)
    assert task._result is None and task.id
    assert task.status().state in ("pending", "assigned", "running")
    assert task.cancel() is True
    with pytest.raises(zkd.TaskCancelled):
        task.wait(timeout=30)


def test_run(client):
    assert client.run("echo", "hello", timeout=30) == "hello"
    assert client.run("sum", [2, 3]) == {"sum": 5}


def test_failures_raise_task_failed_with_the_results_code(client):
    task = client.submit("fail", "on purpose")
    with pytest.raises(zkd.TaskFailed) as e:
        task.wait(timeout=30)
    err = e.value
    assert isinstance(err, zkd.ApiError)
    assert err.state == "failed"
    assert err.code == "handler_error"
    assert "on purpose" in err.message or err.message
    assert err.task_id == task.id
    assert err.result["state"] == "failed"
    # Waiting again raises again (the handle kept the result).
    with pytest.raises(zkd.TaskFailed):
        task.wait()


def test_a_task_timeout_raises_task_timed_out(client):
    task = client.submit("sleep", {"ms": 30000}, timeout=0.3)
    with pytest.raises(zkd.TaskTimedOut) as e:
        task.wait(timeout=30)
    assert e.value.state == "timed_out"
    assert e.value.code == "timeout"


def test_cancel_and_status(client):
    task = client.submit("sleep", {"ms": 60000}, max_attempts=1)
    deadline = time.monotonic() + 30
    st = task.status()
    while st.state != "running" and time.monotonic() < deadline:
        time.sleep(0.05)
        st = task.status()
    assert st.state == "running" and st.worker and st.result is None and not st.done
    assert task.cancel() is True
    with pytest.raises(zkd.TaskCancelled) as e:
        task.wait(timeout=30)
    assert e.value.code == "cancelled"
    # A finished (here: consumed) task cannot be cancelled.
    with pytest.raises(zkd.UnknownTask):
        task.cancel()
    done = client.submit("echo", 1)
    deadline = time.monotonic() + 30
    while not done.status().done and time.monotonic() < deadline:
        time.sleep(0.05)
    assert done.cancel() is False  # finished: nothing to cancel
    st = done.status()
    assert st.state == "succeeded" and st.result["value"] == 1


def test_a_wait_that_runs_out_raises_wait_timeout_and_the_task_goes_on(client):
    task = client.submit("sleep", {"ms": 1500})
    t0 = time.monotonic()
    with pytest.raises(zkd.WaitTimeout) as e:
        task.wait(timeout=0.2)
    assert isinstance(e.value, TimeoutError)
    assert e.value.task_id == task.id and e.value.code == "wait_timeout"
    assert time.monotonic() - t0 < 1.4
    task.wait(timeout=30)
    assert task.result()["state"] == "succeeded"


def test_wait_without_consuming(client):
    task = client.submit("echo", "keep")
    result = task.result(timeout=30, consume=False)
    assert result["state"] == "succeeded" and result["value"] == "keep"
    # Still there for another reader, who consumes it.
    other = client.task(task.id)
    assert other.status().result["value"] == "keep"
    assert other.wait(timeout=30) == "keep"
    with pytest.raises(zkd.UnknownTask):
        client.task(task.id).wait(timeout=5)


def test_unknown_and_malformed_ids(client):
    with pytest.raises(zkd.UnknownTask) as e:
        client.task("t5-1763733600123-00000000000000").wait(timeout=1)
    assert e.value.task_id == "t5-1763733600123-00000000000000"
    with pytest.raises(zkd.ApiError) as e:
        client.status("not-an-id")
    assert e.value.status == 400 and e.value.code == "bad_task_id"


def test_an_unserved_type_is_refused_unless_allowed(client):
    with pytest.raises(zkd.UnservedType) as e:
        client.submit("resize", {"w": 10})
    assert e.value.status == 409 and "echo" in e.value.message
    task = client.submit("resize", {"w": 10}, allow_unserved=True)
    assert task.status().state == "pending"
    assert task.cancel() is True
    with pytest.raises(zkd.TaskCancelled):
        task.wait(timeout=30)


def test_invalid_tasks(client):
    with pytest.raises(zkd.InvalidTask) as e:
        client.submit("echo", priority=42)
    assert e.value.status == 400 and "priority" in e.value.message
    with pytest.raises(zkd.InvalidTask):
        client.submit("no spaces please")
    with pytest.raises(ValueError):
        client.submit("echo", float("nan"))  # not JSON: refused before sending


def test_submit_many_and_bundles(client):
    tasks = client.submit_many(
        [{"type": "echo", "args": i} for i in range(5)] + [{"type": "sum", "args": [1, 1]}]
    )
    assert [t.wait(timeout=30) for t in tasks] == [0, 1, 2, 3, 4, {"sum": 2}]
    bundled = client.submit_many([{"type": "echo", "args": c} for c in "abc"], bundle=10)
    assert [t.id[-2:] for t in bundled] == [".0", ".1", ".2"]
    assert [t.wait(timeout=30) for t in bundled] == ["a", "b", "c"]


def test_tasks_and_cluster(client, node):
    view = client.cluster()
    assert view["master"] and view["workers"]
    assert "echo" in view["workers"][0]["types"]
    slow = client.submit("sleep", {"ms": 60000})
    # (A listing reads pending, then the assignments: a task moving between the two reads
    # may be missed by one listing.)
    deadline = time.monotonic() + 30
    while True:
        listed = client.tasks(limit=10)
        ids = [t["id"] for t in listed["pending"] + listed["assigned"]]
        if slow.id in ids or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert slow.id in ids and listed["limit"] == 10
    slow.cancel()
    with pytest.raises(zkd.TaskCancelled):
        slow.wait(timeout=30)


def test_keep_alive_reuses_one_connection_and_survives_the_server_closing_it(client, monkeypatch):
    client.cluster()
    sock = client._local.conn.sock
    client.cluster()
    assert client._local.conn.sock is sock  # the same connection
    # The server closes a connection idle for 10 s; a reused connection it closed is
    # opened again, the request sent once more.
    monkeypatch.setattr(client_module, "_IDLE_REUSE_S", 1000.0)
    time.sleep(11)
    assert client.run("echo", "after idle", timeout=30) == "after idle"


def test_threads_share_a_client(client):
    out = {}

    def work(i: int) -> None:
        out[i] = client.run("echo", i, timeout=30)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert out == {i: i for i in range(6)}


def test_no_server_is_unavailable():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    c = zkd.Client(f"http://127.0.0.1:{port}", timeout=5)
    with pytest.raises(zkd.Unavailable) as e:
        c.cluster()
    assert e.value.code == "connection" and e.value.status is None
    with pytest.raises(ValueError):
        zkd.Client("ftp://example")


def test_a_token(start_node, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token\n")
    node = start_node("--http-token-file", str(token_file))
    with pytest.raises(zkd.Unauthorized) as e:
        zkd.Client(node.url).cluster()
    assert e.value.status == 401
    with pytest.raises(zkd.Unauthorized):
        zkd.Client(node.url, token="wrong").cluster()
    good = zkd.Client(node.url, token="s3cret-token")
    node.wait_ready(good)
    assert good.run("echo", "with token", timeout=30) == "with token"


def test_token_and_url_from_the_environment(start_node, tmp_path, monkeypatch):
    token_file = tmp_path / "token"
    token_file.write_text("env-token\n")
    node = start_node("--http-token-file", str(token_file))
    monkeypatch.setenv("ZKD_URL", node.url)
    monkeypatch.setenv("ZKD_HTTP_TOKEN_FILE", str(token_file))
    monkeypatch.delenv("ZKD_HTTP_TOKEN", raising=False)
    c = zkd.Client()
    node.wait_ready(c)
    assert c.url == node.url
    assert c.run("echo", 7, timeout=30) == 7


def test_a_full_queue(start_node):
    node = start_node("--max-pending", "1", "--capacity", "0")
    c = zkd.Client(node.url)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # a master, no worker: tasks stay pending
        try:
            if c.cluster().get("master"):
                break
        except zkd.Unavailable:
            pass
        time.sleep(0.1)
    first = c.submit("echo", 1, allow_unserved=True)
    with pytest.raises(zkd.QueueFull) as e:
        for _ in range(5):  # the bound is read at most a second before
            c.submit("echo", 2, allow_unserved=True)
            time.sleep(0.5)
    assert e.value.status == 429
    first.cancel()


def test_https_with_a_ca_file(start_node, tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    made = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "1", "-subj", "/CN=localhost", "-addext",
         "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", str(key), "-out", str(cert)],
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, f"openssl (Debian package openssl): {made.stderr}"
    node = start_node("--http-tls-cert", str(cert), "--http-tls-key", str(key))
    assert node.url.startswith("https://")
    c = zkd.Client(node.url, cafile=str(cert))
    node.wait_ready(c)
    assert c.run("echo", "over tls", timeout=30) == "over tls"
    # Without the CA, the certificate is refused: no answer is trusted.
    with pytest.raises(zkd.Unavailable) as e:
        zkd.Client(node.url).cluster()
    assert e.value.code == "connection" and "CERTIFICATE" in e.value.message.upper()
