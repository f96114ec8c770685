#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# Where a task's ZooKeeper requests go: counts the "Processing request::" lines a ZooKeeper
# started with `zkd-zk-local start --log-requests` wrote to its server.log, per session role
# (client, master, worker), request type and path kind, and divides by the tasks of a phase.
# Usage: bench/requests.py SERVER_LOG ROLES_FILE PHASES_FILE [--json OUT]
#   ROLES_FILE:  lines "<session id hex> <role>" (bench/requests.sh writes it from `dump`);
#                sessions not listed are "client"
#   PHASES_FILE: lines "<name> <first line> <last line> <tasks>" (1-based, inclusive) of the log
import collections
import json
import re
import sys

LINE = re.compile(r"Processing request:: sessionid:0x([0-9a-f]+) type:(\S+) cxid:\S+ "
                  r"zxid:0x([0-9a-f]+) txntype:(-?\d+|unknown) reqpath:(\S*)")

# Path kinds, relative to the namespace's chroot (/zkd/<ns>).
KINDS = [
    (re.compile(r"/pending/[^/]+/"), "/pending/<s>/<tid>"),
    (re.compile(r"/pending/[^/]+$"), "/pending/<s>"),
    (re.compile(r"/pending$"), "/pending"),
    (re.compile(r"/assign/[^/]+/[^/]+\.cancel$"), "/assign/<w>/<tid>.cancel"),
    (re.compile(r"/assign/[^/]+/"), "/assign/<w>/<tid>"),
    (re.compile(r"/assign/[^/]+$"), "/assign/<w>"),
    (re.compile(r"/results/[^/]+/"), "/results/<r>/<tid>"),
    (re.compile(r"/results/[^/]+$"), "/results/<r>"),
    (re.compile(r"/receipts/"), "/receipts/<k>"),
    (re.compile(r"/workers/"), "/workers/<w>"),
    (re.compile(r"/workers$"), "/workers"),
    (re.compile(r"/election"), "/election..."),
    (re.compile(r"/master$"), "/master"),
    (re.compile(r"/epoch$"), "/epoch"),
    (re.compile(r"/cancel"), "/cancel..."),
]


def kind(path):
    if path in ("", "n/a"):
        return "-"
    for rx, name in KINDS:
        if rx.search(path):
            return name
    return path


def main(argv):
    log, roles_file, phases_file = argv[1:4]
    out_json = argv[argv.index("--json") + 1] if "--json" in argv else None
    roles = {}
    with open(roles_file) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2:
                roles[parts[0].lower().lstrip("0x").lstrip("0") or "0"] = parts[1]
    phases = []
    with open(phases_file) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 4:
                phases.append((parts[0], int(parts[1]), int(parts[2]), int(parts[3])))

    counts = {p[0]: collections.Counter() for p in phases}
    with open(log, errors="replace") as f:
        for n, line in enumerate(f, 1):
            m = LINE.search(line)
            if not m:
                continue
            for name, first, last, _ in phases:
                if first <= n <= last:
                    sid, typ, zxid, txntype, path = m.groups()
                    role = roles.get(sid.lstrip("0") or "0", "client")
                    # txntype: the transaction a write carried (-1: an error, e.g. a failed
                    # multi; -10/-11: createSession/closeSession); reads carry none.
                    write = txntype != "unknown"
                    if txntype == "-1":
                        typ += "(failed)"  # an error transaction: the write was refused
                    counts[name][(role, typ, kind(path), "write" if write else "read")] += 1

    report = {}
    for name, first, last, tasks in phases:
        c = counts[name]
        total = sum(c.values())
        writes = sum(v for k, v in c.items() if k[3] == "write")
        by_role = collections.Counter()
        for k, v in c.items():
            by_role[(k[0], k[3])] += v
        print(f"== {name}: {tasks} tasks, log lines {first}-{last}")
        print(f"   requests/task {total / tasks:.2f}, of which write requests {writes / tasks:.2f}")
        for role in ("client", "master", "worker"):
            r = by_role[(role, "read")] / tasks
            w = by_role[(role, "write")] / tasks
            print(f"   {role:7s} {r + w:6.2f} / task  (reads {r:.2f}, writes {w:.2f})")
        print(f"   {'role':7s} {'type':14s} {'path':26s} {'per task':>9s} {'count':>8s}")
        rows = sorted(c.items(), key=lambda kv: (kv[0][0], -kv[1]))
        for (role, typ, k, rw), v in rows:
            print(f"   {role:7s} {typ:14s} {k:26s} {v / tasks:9.3f} {v:8d}")
        report[name] = {
            "tasks": tasks,
            "requests_per_task": total / tasks,
            "writes_per_task": writes / tasks,
            "rows": [{"role": k[0], "type": k[1], "path": k[2], "kind": k[3], "count": v,
                      "per_task": v / tasks} for k, v in rows],
        }
    if out_json:
        with open(out_json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main(sys.argv)
