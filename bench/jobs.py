#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# The HTTP side of bench/jobs.sh: submits delayed tasks through a `zkd run --http` and reads
# their results back, over one keep-alive connection (docs/http.md).
# Usage:
#   bench/jobs.py lateness HOST:PORT N SPREAD_MS LEAD_MS
#       N echo tasks due over SPREAD_MS, the first LEAD_MS after the submit (arrays of 20,
#       each array its own delay_ms); waits for every result and prints one JSON object:
#       the lateness (started_ms - due_ms, the due time read from the id, protocol §4.3)
#       percentiles in ms.
#   bench/jobs.py park HOST:PORT N DELAY_MS
#       N echo tasks due DELAY_MS from now, in arrays of 1,000; prints how long it took.
import http.client
import json
import sys
import time


def post(conn, path, body):
    conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    if r.status not in (200, 201):
        raise SystemExit(f"POST {path}: {r.status} {data[:300]!r}")
    return json.loads(data)


def result(conn, tid):
    # Waits up to 60 s for it and consumes it (DELETE .../result?wait=MS, docs/http.md).
    conn.request("DELETE", f"/v1/tasks/{tid}/result?wait=60000")
    r = conn.getresponse()
    data = r.read()
    if r.status != 200:
        raise SystemExit(f"result of {tid}: {r.status} {data[:300]!r}")
    return json.loads(data)


def due_of(tid):
    return int(tid.split("-")[1])


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100.0 * len(xs)))]


def lateness(addr, n, spread_ms, lead_ms):
    conn = http.client.HTTPConnection(addr, timeout=120)
    ids = []
    groups = max(1, n // 20)
    t0 = time.time()
    for g in range(groups):
        size = n // groups + (1 if g < n % groups else 0)
        # Each array's delay counts from its own POST: aim every group at its due time.
        due = t0 * 1000 + lead_ms + spread_ms * g / max(1, groups - 1)
        delay = max(1, int(due - time.time() * 1000))
        body = [{"type": "echo", "args": {"g": g, "i": i}, "delay_ms": delay} for i in range(size)]
        ids += post(conn, "/v1/tasks", body)["ids"]
    submit_s = time.time() - t0
    late = []
    for tid in ids:
        r = result(conn, tid)
        if r.get("state") != "succeeded":
            raise SystemExit(f"{tid}: {r}")
        late.append(r["started_ms"] - due_of(tid))
    print(json.dumps({"tasks": len(ids), "submit_s": round(submit_s, 3),
                      "early": sum(1 for x in late if x < 0),
                      "p50_ms": pct(late, 50), "p90_ms": pct(late, 90), "p99_ms": pct(late, 99),
                      "max_ms": max(late), "min_ms": min(late)}))


def park(addr, n, delay_ms):
    conn = http.client.HTTPConnection(addr, timeout=120)
    t0 = time.time()
    done = 0
    while done < n:
        size = min(1000, n - done)
        body = [{"type": "echo", "args": done + i, "delay_ms": delay_ms} for i in range(size)]
        post(conn, "/v1/tasks", body)
        done += size
    print(json.dumps({"tasks": n, "submit_s": round(time.time() - t0, 3)}))


def main():
    if len(sys.argv) == 6 and sys.argv[1] == "lateness":
        lateness(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    elif len(sys.argv) == 5 and sys.argv[1] == "park":
        park(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        raise SystemExit(__doc__ or "usage: see the head of bench/jobs.py")


if __name__ == "__main__":
    main()
