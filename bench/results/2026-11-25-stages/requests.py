#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# The analysis of capture.sh requests: for each process's ZooKeeper connection, lines up the
# requests it issued and the completions it got (zkco-times.diff's files) with the capture's
# requests and answers by xid (the C client numbers a session's requests in order, and
# ZooKeeper answers them in order), then prints, per process, three parts of a request's time:
# issue -> on the wire, on the wire -> answer on the wire, answer -> completion callback.
# The offset between the process's k-th request and the capture's first xid is the one that
# puts no request on the wire before it was issued (and the same for the callbacks).
# Usage: python3 requests.py OUT_DIR
import bisect
import collections
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkwire  # noqa: E402

out = sys.argv[1]
port = open(out + "/port").read().strip()
who = {}
for line in open(out + "/ss.txt"):
    m = re.search(r"127\.0\.0\.1:(\d+)\s+127\.0\.0\.1:%s\s.*\(\"([^\"]+)\",pid=(\d+)" % port, line)
    if m:
        who[m.group(1)] = (m.group(2), m.group(3))
sent = collections.defaultdict(dict)
answered = collections.defaultdict(dict)
for t, src, dst, f in zkwire.frames(open(out + "/cap.txt")):
    if zkwire.xid(f) >= 0:  # not a notification (-1), ping (-2) or the like
        (sent[src] if dst == port else answered[dst]).setdefault(zkwire.xid(f), t)


def q(v):
    v = sorted(v)
    n = len(v)
    return f"p50 {v[n // 2]:.3f}  p90 {v[n * 9 // 10]:.3f}  p99 {v[n * 99 // 100]:.3f}"


def align(times, wire, xids, x0, hint, before):
    """The index of x0 in `times` that puts the fewest events on the wire on the wrong side."""
    best = None
    for k0 in range(max(0, hint - 30), hint + 30):
        d = [(wire[x] - times[k0 + x - x0]) * (1 if before else -1)
             for x in xids if 0 <= k0 + x - x0 < len(times)]
        if len(d) < len(xids) * 0.9:
            continue
        key = (sum(v < -0.00005 for v in d), sorted(d)[len(d) // 2])
        if best is None or key < best[0]:
            best = (key, k0)
    return best


rows = []
for conn, reqs in sent.items():
    if conn not in who:
        continue
    comm, pid = who[conn]
    issue = [int(x) / 1e9 for x in open(f"{out}/issue-{pid}.txt")]
    done = [int(x) / 1e9 for x in open(f"{out}/callback-{pid}.txt")]
    xids = sorted(x for x in reqs if x in answered[conn])
    if len(xids) < 100:
        continue
    x0 = xids[0]
    k = bisect.bisect_right(issue, reqs[x0]) - 1
    (neg_i, _), k0 = align(issue, reqs, xids, x0, k, True)
    (neg_c, _), c0 = align(done, answered[conn], xids, x0, k0, False)
    pre = [(reqs[x] - issue[k0 + x - x0]) * 1000 for x in xids if k0 + x - x0 < len(issue)]
    wire = [(answered[conn][x] - reqs[x]) * 1000 for x in xids]
    post = [(done[c0 + x - x0] - answered[conn][x]) * 1000
            for x in xids if 0 <= c0 + x - x0 < len(done)]
    rows.append((len(xids), comm, pid, neg_i, neg_c, c0 - k0, pre, wire, post))
rows.sort(key=lambda r: -r[0])
for i, (n, comm, pid, neg_i, neg_c, shift, pre, wire, post) in enumerate(rows):
    role = "client (loadgen)" if comm == "zkd-loadgen" else (
        "zkd run, the master's node" if i <= 1 else "zkd run, a worker")
    print(f"{role}, pid {pid}: {n} requests (misplaced in the line-up: {neg_i} issued, "
          f"{neg_c} answered; callback offset {shift:+d}), ms:")
    print(f"   issue -> on the wire        {q(pre)}")
    print(f"   on the wire -> answer       {q(wire)}")
    print(f"   answer -> callback          {q(post)}")
