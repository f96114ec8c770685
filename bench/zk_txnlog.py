#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# Where a task's time goes, read from the ZooKeeper transaction log of a bench's own server
# (bench/jobs.sh, bench/schedules.sh): the server stamps every transaction with its clock in
# ms, and the log holds each task's creates (its pending node or its assignment, its result
# with the worker's started_ms and finished_ms). The server, the master and the workers
# share the machine's clock.
# Usage: bench/zk_txnlog.py chain DATA_DIR CLIENT_HEX
#        bench/zk_txnlog.py firings DATA_DIR NAMESPACE [SINCE_MS]
#   DATA_DIR: the server's dataDir (its version-2/log.* files are read);
#   CLIENT_HEX: the workflow's client part (its tasks' ids hold it).
# chain: the tasks of one workflow, one after the other (a chain); prints one JSON object:
# the steps found and the mean, p50 and p99 in ms of each hop:
#   engine:  the previous step's result committed (T4) -> this step's task created (W2):
#            the engine's watch, its read of the change log, its decision and W2;
#   place:   W2 -> the task's assignment committed (T2 by the master; 0 when W2 placed it);
#   take:    the assignment committed -> the worker's started_ms;
#   run:     started_ms -> finished_ms;
#   publish: finished_ms -> the result committed (T4);
#   step:    the previous step's result -> this step's result.
# firings: every schedule firing with a result (task ids t<p>-<due>-<client>000000, §12.2)
# in NAMESPACE (zkd run --namespace), due at SINCE_MS (ms since the epoch) or later;
# prints the firings, the mean, p50, p99 and max in ms of the lateness (started_ms - due),
# and of its parts: decide (due -> the firing's pending create, S4), place (-> its
# assignment, T2), take (-> started_ms).
import glob
import json
import os
import struct
import sys

CREATE_TYPES = {1, 15, 19, 21}  # create, create2, createContainer, createTTL
MULTI = 14


class Reader:
    def __init__(self, b):
        self.b = b
        self.at = 0

    def int(self):
        v = struct.unpack_from(">i", self.b, self.at)[0]
        self.at += 4
        return v

    def long(self):
        v = struct.unpack_from(">q", self.b, self.at)[0]
        self.at += 8
        return v

    def buf(self):
        n = self.int()
        if n < 0:
            return b""
        v = self.b[self.at:self.at + n]
        self.at += n
        return v


def creates(path):
    """(time_ms, path, data) of every create in the log file, in log order."""
    with open(path, "rb") as f:
        b = f.read()
    at = 16  # magic, version, dbid
    while at + 12 <= len(b):
        _crc, n = struct.unpack_from(">qi", b, at)
        if n <= 0 or at + 12 + n > len(b):
            return
        r = Reader(b[at + 12:at + 12 + n])
        at += 12 + n + 1  # the record, then its end byte 'B'
        r.long()  # clientId
        r.int()   # cxid
        r.long()  # zxid
        time_ms = r.long()
        kind = r.int()
        subs = []
        if kind == MULTI:
            for _ in range(r.int()):
                t = r.int()
                subs.append((t, r.buf()))
        elif kind in CREATE_TYPES:
            subs.append((kind, r.b[r.at:]))
        for t, data in subs:
            if t not in CREATE_TYPES:
                continue
            s = Reader(data)
            p = s.buf().decode()
            yield time_ms, p, s.buf()


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100.0 * len(xs)))]


def read_log(data_dir, match, namespace=None):
    """launched, assigned, result of the tasks whose names pass `match`, by name."""
    files = sorted(glob.glob(os.path.join(data_dir, "version-2", "log.*")),
                   key=lambda f: int(f.rsplit(".", 1)[1], 16))
    launched, assigned, result = {}, {}, {}
    for f in files:
        for t, p, data in creates(f):
            parts = p.split("/")
            if len(parts) < 4 or not match(parts[-1]) or parts[-1].endswith(".cancel"):
                continue
            if namespace is not None and (len(parts) < 5 or parts[-4] != namespace):
                continue
            kind, name = parts[-3], parts[-1]
            if kind == "pending":
                launched.setdefault(name, t)
            elif kind == "assign":
                assigned.setdefault(name, t)
                launched.setdefault(name, t)  # placed by its creator itself
            elif kind == "results":
                try:
                    r = json.loads(data)
                except ValueError:
                    continue
                result[name] = (t, r.get("started_ms"), r.get("finished_ms"))
    return launched, assigned, result


def summary(xs, with_max=False):
    out = {"mean": round(sum(xs) / len(xs), 2), "p50": pct(xs, 50), "p99": pct(xs, 99)}
    if with_max:
        out["max"] = max(xs)
    return out


def chain(data_dir, client):
    launched, assigned, result = read_log(data_dir, lambda n: client in n)
    order = sorted((t, n) for n, t in launched.items() if n in result and n in assigned)
    hops = {k: [] for k in ("engine", "place", "take", "run", "publish", "step")}
    prev = None
    for _, n in order:
        w2 = launched[n]
        t2 = assigned[n]
        t4, started, finished = result[n]
        if prev is not None:
            hops["engine"].append(w2 - prev)
            hops["step"].append(t4 - prev)
        hops["place"].append(t2 - w2)
        hops["take"].append(started - t2)
        hops["run"].append(finished - started)
        hops["publish"].append(t4 - finished)
        prev = t4
    out = {"steps": len(order)}
    for k, xs in hops.items():
        if xs:
            out[k] = summary(xs)
    print(json.dumps(out))


def firings(data_dir, namespace, since_ms):
    def is_firing(n):
        f = n.split("-")
        return (len(f) == 3 and len(f[1]) == 13 and len(f[2]) == 14 and f[2].endswith("000000")
                and int(f[1]) >= since_ms)
    launched, assigned, result = read_log(data_dir, is_firing, namespace)
    hops = {k: [] for k in ("lateness", "decide", "place", "take")}
    for n, (_, started, _) in result.items():
        if started is None or n not in launched or n not in assigned:
            continue
        due = int(n.split("-")[1])
        hops["lateness"].append(started - due)
        hops["decide"].append(launched[n] - due)
        hops["place"].append(assigned[n] - launched[n])
        hops["take"].append(started - assigned[n])
    out = {"firings": len(hops["lateness"])}
    for k, xs in hops.items():
        if xs:
            out[k] = summary(xs, True)
    print(json.dumps(out))


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "chain":
        chain(sys.argv[2], sys.argv[3])
    elif len(sys.argv) in (4, 5) and sys.argv[1] == "firings":
        firings(sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) == 5 else 0)
    else:
        raise SystemExit(__doc__ or "usage: see the head of bench/zk_txnlog.py")


if __name__ == "__main__":
    main()
