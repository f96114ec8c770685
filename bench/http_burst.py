#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# The client side of bench/http.sh: N POST /v1/tasks?wait=30000 of one `echo` task each, from
# C keep-alive connections at once (one thread each); prints one JSON line: tasks/s, latency
# p50/p99 in ms of the answers 200, and the answers that were not 200.
# Usage: bench/http_burst.py HOST:PORT N C
import http.client
import json
import sys
import threading
import time

host, port = sys.argv[1].rsplit(":", 1)
total, conns = int(sys.argv[2]), int(sys.argv[3])
body = json.dumps({"type": "echo", "args": {"n": 1}})
lock = threading.Lock()
started = 0
latencies = []
errors = []


def run():
    global started
    c = http.client.HTTPConnection(host, int(port), timeout=60)
    while True:
        with lock:
            if started >= total:
                return
            started += 1
        t = time.monotonic()
        try:
            c.request("POST", "/v1/tasks?wait=30000", body=body,
                      headers={"Content-Type": "application/json"})
            r = c.getresponse()
            answer = r.read()
            status = r.status
        except OSError as e:
            c.close()
            status, answer = 0, str(e).encode()
        with lock:
            if status == 200:
                latencies.append(time.monotonic() - t)
            else:
                errors.append(f"{status} {answer[:120]!r}")


t0 = time.monotonic()
threads = [threading.Thread(target=run) for _ in range(conns)]
for t in threads:
    t.start()
for t in threads:
    t.join()
elapsed = time.monotonic() - t0
latencies.sort()
latencies = latencies or [float("nan")]
print(json.dumps({
    "tasks_per_s": round(total / elapsed),
    "p50_ms": round(latencies[len(latencies) // 2] * 1000, 1),
    "p99_ms": round(latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000, 1),
    "errors": len(errors),
    "first_errors": errors[:3],
}))
