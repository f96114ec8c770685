#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Follows each task id through a packet capture of ZooKeeper's port (tcpdump -n -tt -x on
# stdin; capture.sh makes it) and prints where the time between the client's T1 leaving and
# its result arriving goes, stage by stage, as seen on the wire:
#   T1 sent -> master has log     T1's commit, the master's watch, its read of the shard's log
#   master read -> T2 sent        the master's decision (it waits for shard reads still out)
#   T2 sent -> worker has log     T2's commit, the worker's watch, its read of its log
#   worker read -> T4 sent        the worker: the compute pool's hop and back, then T4
#   T4 sent -> client has result  T4's commit, the client's watch, its read of its results log
# and each task's sum of stages 1, 4 and 5: what a path without the master would leave (an
# estimate, for the load would change too);
# and, per connection role, how long ZooKeeper took to answer each kind of request and how
# long a process took from a watch notification to the read it sent for it.
# A task some stage of which is not found (a listing instead of a log read, say) is left
# out of the stage table; zkwire.py decodes the frames.
# Usage: python3 stages.py PORT < capture.txt
import collections
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkwire  # noqa: E402

port = sys.argv[1]
names = {1: "create", 2: "delete", 3: "exists", 4: "getData", 5: "setData", 8: "getChildren",
         11: "ping", 12: "getChildren2", 14: "multi"}
tid_re = re.compile(rb"t\d-\d{13}-[0-9a-f]{14}")
per_task = collections.defaultdict(list)   # tid -> [(t, conn, "req"|"resp", op)]
req_op, req_t = {}, {}
latency = collections.defaultdict(list)    # (conn, op) -> ms
notified = {}
reaction = collections.defaultdict(list)   # conn -> ms from a notification to the next getData
for t, src, dst, f in zkwire.frames(sys.stdin):
    x = zkwire.xid(f)
    if dst == port:
        conn, kind = src, "req"
        op = names.get(int.from_bytes(f[8:12], "big", signed=True), "other")
        req_op[(conn, x)], req_t[(conn, x)] = op, t
        if op == "getData" and conn in notified:
            reaction[conn].append((t - notified.pop(conn)) * 1000)
    else:
        conn, kind = dst, "resp"
        if x == -1:
            op = "notification"
            notified.setdefault(conn, t)
        else:
            op = req_op.get((conn, x), "other")
            if (conn, x) in req_t:
                latency[(conn, op)].append((t - req_t.pop((conn, x))) * 1000)
    for m in set(tid_re.findall(f)):
        per_task[m].append((t, conn, kind, op))

stages = collections.defaultdict(list)
whole = []
without_master = []
role = {}
for evs in per_task.values():
    evs.sort()
    t1 = evs[0]
    if t1[2] != "req" or t1[3] != "multi":
        continue
    client = t1[1]

    def first(pred, after):
        return next((e for e in evs if e[0] >= after and pred(e)), None)

    # A multi's answer names what it created: the reads are the stages' ends, not those.
    mr = first(lambda e: e[1] != client and e[2] == "resp" and e[3] != "multi", t1[0])
    t2 = mr and first(lambda e: e[1] == mr[1] and e[2] == "req" and e[3] == "multi", mr[0])
    wr = t2 and first(
        lambda e: e[1] != client and e[2] == "resp" and e[3] != "multi" and e[0] > t2[0], t2[0]
    )
    t4 = wr and first(lambda e: e[1] == wr[1] and e[2] == "req" and e[3] == "multi", wr[0])
    cr = t4 and first(lambda e: e[1] == client and e[2] == "resp" and e[3] != "multi", t4[0])
    if not cr:
        continue
    role[client], role[mr[1]] = "client", "master node"
    role.setdefault(wr[1], "worker node")
    points = [t1[0], mr[0], t2[0], wr[0], t4[0], cr[0]]
    for i in range(5):
        stages[i].append((points[i + 1] - points[i]) * 1000)
    whole.append((cr[0] - t1[0]) * 1000)
    # What a protocol without the master on a task's path would leave of this task's time:
    # its stages 1, 4 and 5 (an estimate: the load, and so every leg, would change too).
    without_master.append((points[1] - points[0] + points[5] - points[3]) * 1000)


def q(v):
    v = sorted(v)
    return (f"n {len(v):6d}  p50 {v[len(v) // 2]:6.3f}  p90 {v[len(v) * 9 // 10]:6.3f}  "
            f"p99 {v[len(v) * 99 // 100]:6.3f}  mean {sum(v) / len(v):6.3f}")


labels = ["T1 sent -> master has log", "master read -> T2 sent", "T2 sent -> worker has log",
          "worker read -> T4 sent", "T4 sent -> client has result"]
print(f"tasks followed through every stage: {len(whole)} (ms)")
for i, label in enumerate(labels):
    print(f"  {label:30s} {q(stages[i])}")
print(f"  {'T1 sent -> client has result':30s} {q(whole)}")
print(f"  {'the same less stages 2 and 3':30s} {q(without_master)}")
print("ZooKeeper's answer time by role and request (ms, from the request to its answer on the wire)")
by_role = collections.defaultdict(list)
for (conn, op), v in latency.items():
    if conn in role and op in ("getData", "multi", "getChildren2"):
        by_role[(role[conn], op)] += v
for k in sorted(by_role):
    if len(by_role[k]) >= 50:
        print(f"  {k[0]:12s} {k[1]:13s} {q(by_role[k])}")
print("from a watch notification to the read it causes (ms)")
by_role = collections.defaultdict(list)
for conn, v in reaction.items():
    if conn in role:
        by_role[role[conn]] += v
for k in sorted(by_role):
    if len(by_role[k]) >= 50:
        print(f"  {k:12s} {q(by_role[k])}")
