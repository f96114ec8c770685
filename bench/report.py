#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# Turns one bench/run.sh results directory into results.md (tables, targets) and the data
# files bench/plots.gp draws. Usage: bench/report.py RESULTS_DIR
import json
import os
import sys

MODES = [("fsync", "fsync (forceSync=yes)"), ("nosync", "forceSync=no")]
WORKERS = [1, 2, 4]
DEFAULTS = "defaults: 4 × `zkd run`, no options, no bundles"
TUNED = "tuned: `zkd run --capacity 64 --threads 2`"


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def text(path, default="n/a"):
    try:
        with open(path) as f:
            return f.read().strip() or default
    except OSError:
        return default


def get(d, *keys, default=None):
    for k in keys:
        if not isinstance(d, dict) or k not in d or d[k] is None:
            return default
        d = d[k]
    return d


def num(v, fmt="{:,.0f}"):
    return "n/a" if v is None else fmt.format(v)


def requests_per_task(j):
    """All requests (mntr writes + reads, every session) per task of a loadgen run."""
    zk = get(j, "load", "zookeeper")
    n = get(j, "load", "results") or get(j, "load", "submitted")
    if not zk or not n:
        return None
    return (zk["reads"] + zk["writes"]) / n


def defaults_section(out, raw, add):
    d = os.path.join(out, "defaults")
    one = load(os.path.join(d, "one.json"))
    burst = load(os.path.join(d, "burst.json"))
    spin = load(os.path.join(d, "spin.json"))
    opn = load(os.path.join(d, "open.json"))
    light = load(os.path.join(d, "light.json"))
    if not any((one, burst, spin, opn, light)):
        return None
    rc = get(raw.get("fsync"), "raw", "creates_per_s")
    lat = lambda x, k: num(get(x, "load", "latency_ms", k), "{:.1f}")
    wpt = lambda x: num(get(x, "load", "zookeeper", "writes_per_task"), "{:.2f}")
    rpt = lambda x: num(requests_per_task(x), "{:.1f}")
    bt = get(burst, "load", "tasks_per_s")
    add(f"## Defaults ({DEFAULTS}; fsync ZooKeeper)\n")
    add("What a user gets who starts `zkd run` with no options: 4 processes with default "
        "options, one task per node. *one at a time*: one task in flight; *burst*: every task "
        "submitted at once, 100 per submit call; *open*: scheduled arrivals at half the burst's "
        "rate; *light*: 100 tasks/s. Writes are write transactions (a multi counts once) and "
        "requests are all requests (writes + reads, pings included) of every session, from the "
        "server's `mntr`, per task.\n")
    add("| configuration | load | tasks/s | ÷ raw creates/s | p50 / p99 ms | ZK writes/task "
        "| ZK requests/task | errors |")
    add("|---|---|---:|---:|---|---:|---:|---:|")
    for name, j in (("one at a time", one), ("burst (100 per submit)", burst),
                    ("spin:1 (1 ms CPU)", spin),
                    (f"open at {num(get(opn, 'config', 'rate'))}/s", opn),
                    ("open at 100/s", light)):
        t = get(j, "load", "tasks_per_s")
        ratio = f"{t / rc:.3f}" if t and rc and j is burst else ""
        add(f"| defaults | {name} | {num(t)} | {ratio} | {lat(j, 'p50')} / {lat(j, 'p99')} | "
            f"{wpt(j)} | {rpt(j)} | {num(get(j, 'load', 'errors', 'total'))} |")
    add("")
    return {"one": one, "burst": burst, "open": opn, "rc": rc, "bt": bt}


def cpu(path):
    """(zk cores, zkd cores, wall s) used during a run, from its .cpu file."""
    try:
        zk, zkd, wall = (float(x) for x in text(path, "").split())
        return zk / wall, zkd / wall, wall
    except ValueError:
        return None, None, None


def main(out):
    rows = []
    lines = []
    add = lines.append
    add("# zkd benchmark results\n")
    add("Machine and settings (`machine.txt`):\n")
    add("```\n" + text(os.path.join(out, "machine.txt")) + "\n```\n")

    raw = {m: load(os.path.join(out, m, "raw.json")) for m, _ in MODES}
    add("## Raw ceiling (the same server through zkco, pipelined)\n")
    add("| ZooKeeper | creates/s | multi/s (20 creates) | creates/s inside multis |")
    add("|---|---:|---:|---:|")
    for m, label in MODES:
        r = raw[m]
        add(f"| {label} | {num(get(r, 'raw', 'creates_per_s'))} | "
            f"{num(get(r, 'raw', 'multis_per_s'))} | "
            f"{num(get(r, 'raw', 'creates_in_multis_per_s'))} |")
    add("")

    dflt = defaults_section(out, raw, add)

    add(f"## Tuned ({TUNED}; echo, 16-byte payload unless noted)\n")
    add("burst: every task submitted at once (100 per submit call) and drained; closed: "
        "a fixed number of tasks in flight; open: scheduled arrivals at half the larger of "
        "the two (latency counted from each task's scheduled time); spin:1: tasks burning "
        "1 ms of CPU each. Latency is submit to result consumed, in ms. CPU is in cores "
        "(CPU seconds / wall seconds) during the burst: ZooKeeper's JVM, all zkd processes, "
        "and zkd-loadgen.\n")
    add("ZK writes/reads per task are the servers' `mntr` counters over the closed loop (all "
        "clients, pings included); requests/task splits them into zkd-loadgen's own session "
        "(its zkco counters) and the rest, i.e. the zkd processes (master and workers).\n")
    add("bundled: tasks submitted 256 per submit call in bundles of 64 (one node, one "
        "assignment, one result per bundle: protocol §4.1), 4,096 in flight.\n")
    add("| configuration | ZooKeeper | workers | burst tasks/s | closed tasks/s | best ÷ raw creates/s "
        "| bundled tasks/s | bundled ÷ raw | closed p50 / p99 "
        "| open rate | open p50 / p99 / p99.9 | spin:1 tasks/s | ZK writes/task | ZK reads/task "
        "| requests/task loadgen / zkd | CPU ZK / zkd / loadgen | errors |")
    add("|---|---|---:|---:|---:|---:|---:|---:|---|---:|---|---:|---:|---:|---|---|---:|")
    tput = {}
    for m, label in MODES:
        rc = get(raw[m], "raw", "creates_per_s")
        for w in WORKERS:
            d = os.path.join(out, m, f"w{w}")
            burst = load(os.path.join(d, "burst.json"))
            closed = load(os.path.join(d, "closed.json"))
            opn = load(os.path.join(d, "open.json"))
            spin = load(os.path.join(d, "spin.json"))
            bundled = load(os.path.join(d, "bundled.json"))
            bt = get(burst, "load", "tasks_per_s")
            ct = get(closed, "load", "tasks_per_s")
            bd = get(bundled, "load", "tasks_per_s")
            tput[(m, w)] = (bt, ct, rc, bd)
            best = max(bt or 0, ct or 0)
            ratio = f"{best / rc:.2f}" if best and rc else "n/a"
            bratio = f"{bd / rc:.2f}" if bd and rc else "n/a"
            zc, dc, wall = cpu(os.path.join(d, "burst.json.cpu"))
            lg = None
            if burst and wall:
                lg = (get(burst, "process", "cpu_user_s", default=0) +
                      get(burst, "process", "cpu_sys_s", default=0)) / wall
            cpus = "n/a" if zc is None else f"{zc:.2f} / {dc:.2f} / {lg:.2f}"
            errors = sum(get(x, "load", "errors", "total", default=0) or 0
                         for x in (burst, closed, opn, spin, bundled))
            missing = [n for n, x in (("burst", burst), ("closed", closed), ("open", opn),
                                      ("spin", spin), ("bundled", bundled)) if not get(x, "load")]
            err = str(errors) + (f" (no result: {', '.join(missing)})" if missing else "")
            lat = lambda x, k: num(get(x, "load", "latency_ms", k), "{:.1f}")
            split = "n/a"
            zk = get(closed, "load", "zookeeper")
            cl = get(closed, "load", "client")
            n = get(closed, "load", "results")
            if zk and cl and n:
                mine = cl["reads"] + cl["writes"]
                total = zk["reads"] + zk["writes"]
                split = f"{mine / n:.2f} / {(total - mine) / n:.2f}"
            add(f"| tuned | {label} | {w} | {num(bt)} | {num(ct)} | {ratio} | {num(bd)} | {bratio} | "
                f"{lat(closed, 'p50')} / {lat(closed, 'p99')} | "
                f"{num(get(opn, 'config', 'rate'))} | "
                f"{lat(opn, 'p50')} / {lat(opn, 'p99')} / {lat(opn, 'p999')} | "
                f"{num(get(spin, 'load', 'tasks_per_s'))} | "
                f"{num(get(closed, 'load', 'zookeeper', 'writes_per_task'), '{:.2f}')} | "
                f"{num(get(closed, 'load', 'zookeeper', 'reads_per_task'), '{:.2f}')} | "
                f"{split} | {cpus} | {err} |")
            rows.append((m, w, burst, closed, opn, spin))
    add("")

    add("## Latency floor (open loop at 100 tasks/s)\n")
    add("| configuration | ZooKeeper | p50 | p90 | p99 | p99.9 | max |")
    add("|---|---|---:|---:|---:|---:|---:|")
    floors = [("defaults (4 workers)", "fsync", os.path.join(out, "defaults", "light.json"))]
    floors += [("tuned, 2 workers", m, os.path.join(out, m, "w2", "light.json")) for m, _ in MODES]
    for conf, m, path in floors:
        j = load(path)
        label = dict(MODES)[m]
        add(f"| {conf} | {label} | " + " | ".join(
            num(get(j, "load", "latency_ms", k), "{:.1f}")
            for k in ("p50", "p90", "p99", "p999", "max")) + " |")
    add("")

    add(f"## Batch size ({TUNED}; forceSync=no, 2 workers, closed loop, 512 in flight)\n")
    add("`--batch N` is the number of tasks per `task_client::submit()` call; the client's "
        "batcher folds whatever is queued into multis either way.\n")
    add("| batch | tasks/s | ZK writes/task | ZK reads/task | loadgen write transactions/task "
        "| loadgen multis | p99 ms |")
    add("|---:|---:|---:|---:|---:|---:|---:|")
    for b in (1, 10, 100):
        j = load(os.path.join(out, "nosync", f"batch{b}.json"))
        add(f"| {b} | {num(get(j, 'load', 'tasks_per_s'))} | "
            f"{num(get(j, 'load', 'zookeeper', 'writes_per_task'), '{:.2f}')} | "
            f"{num(get(j, 'load', 'zookeeper', 'reads_per_task'), '{:.2f}')} | "
            f"{num(get(j, 'load', 'client', 'writes_per_task'), '{:.3f}')} | "
            f"{num(get(j, 'load', 'client', 'multis'))} | "
            f"{num(get(j, 'load', 'latency_ms', 'p99'), '{:.1f}')} |")
    add("")

    add(f"## Bundle size ({TUNED}; forceSync=no, 2 workers, 256 tasks per submit call, "
        "4,096 in flight)\n")
    add("Bundle 1 is no bundling (a fifth as many tasks: it is slow).\n")
    add("| bundle | tasks/s | ÷ raw creates/s | ZK writes/task | ZK reads/task | p50 / p99 ms |")
    add("|---:|---:|---:|---:|---:|---|")
    rc = get(raw["nosync"], "raw", "creates_per_s")
    for b in (1, 16, 64, 256):
        j = load(os.path.join(out, "nosync", f"bundle{b}.json"))
        t = get(j, "load", "tasks_per_s")
        add(f"| {b} | {num(t)} | {f'{t / rc:.2f}' if t and rc else 'n/a'} | "
            f"{num(get(j, 'load', 'zookeeper', 'writes_per_task'), '{:.3f}')} | "
            f"{num(get(j, 'load', 'zookeeper', 'reads_per_task'), '{:.3f}')} | "
            f"{num(get(j, 'load', 'latency_ms', 'p50'), '{:.1f}')} / "
            f"{num(get(j, 'load', 'latency_ms', 'p99'), '{:.1f}')} |")
    add("")

    idle_kb = text(os.path.join(out, "idle_rss_kb"))
    mem = text(os.path.join(out, "master_mem.txt"), "").split()
    per_task = None
    if len(mem) == 3:
        before, after, n = (int(x) for x in mem)
        per_task = (after - before) * 1024 / n
    heap = text(os.path.join(out, "zk_heap.txt"), "").split()
    heap_per_task = None
    if len(heap) == 3 and int(heap[2]) > 0 and int(heap[1]) > 0:
        heap_per_task = (int(heap[1]) - int(heap[0])) * 1024 / int(heap[2])
    lag = text(os.path.join(out, "lag_p99_s"))
    lag_ms = None
    try:
        lag_ms = float(lag) * 1000
    except ValueError:
        pass
    add("## Memory and event-loop lag\n")
    add(f"- idle `zkd run` (worker + candidate, no tasks): {idle_kb} kB RSS")
    if len(mem) == 3:
        add(f"- master with {int(mem[2]):,} pending tasks and no workers: RSS {int(mem[0]):,} kB "
            f"→ {int(mem[1]):,} kB, {per_task:,.0f} bytes per pending task")
    else:
        add("- master memory per pending task: n/a")
    if heap_per_task is not None:
        add(f"- ZooKeeper's used heap after a full GC (`jcmd GC.run`, `GC.heap_info`) with the "
            f"same {int(heap[2]):,} pending tasks: {int(heap[0]):,} kB → {int(heap[1]):,} kB, "
            f"**{heap_per_task:,.0f} bytes per pending task**")
    else:
        add("- ZooKeeper heap per pending task: n/a (jcmd missing?)")
    backlog = text(os.path.join(out, "backlog", "summary.txt"), "")
    if backlog:
        add("")
        add("## Backlog (bench/backlog.sh: pending tasks with no workers, then workers join)\n")
        add("```\n" + backlog + "\n```")
    add(f"- event-loop lag p99 of a worker with a saturated pool: "
        f"{'n/a (no --http /metrics)' if lag_ms is None else f'{lag_ms:.2f} ms'}")
    add("")

    # Targets (reported, not asserted).
    add("## Targets\n")
    add("| target | measured | met |")
    add("|---|---|---|")
    if dflt:
        rc, bt = dflt["rc"], dflt["bt"]
        r = bt / rc if bt and rc else None
        add(f"| defaults: burst tasks/s ÷ raw creates/s ≥ 0.25 | "
            f"{num(bt)} ÷ {num(rc)} = {num(r, '{:.3f}')} | "
            f"{'n/a' if r is None else ('yes' if r >= 0.25 else 'no')} |")
        w = get(dflt["burst"], "load", "zookeeper", "writes_per_task")
        q = requests_per_task(dflt["burst"])
        add(f"| defaults, under load (burst): ≤ 1 write and ≤ 4 requests per task | "
            f"{num(w, '{:.2f}')} writes, {num(q, '{:.1f}')} requests | "
            f"{'n/a' if w is None or q is None else ('yes' if w <= 1 and q <= 4 else 'no')} |")
        w = get(dflt["one"], "load", "zookeeper", "writes_per_task")
        q = requests_per_task(dflt["one"])
        p50 = get(dflt["one"], "load", "latency_ms", "p50")
        add(f"| defaults, one at a time: 4 writes, ≤ 8 requests, p50 ≤ 2 ms | "
            f"{num(w, '{:.2f}')} writes, {num(q, '{:.1f}')} requests, p50 "
            f"{num(p50, '{:.1f}')} ms | "
            f"{'n/a' if None in (w, q, p50) else ('yes' if w <= 4.05 and q <= 8 and p50 <= 2 else 'no')} |")
        p99 = get(dflt["open"], "load", "latency_ms", "p99")
        add(f"| defaults: p99 ≤ 10 ms in an open loop at half the burst's rate | "
            f"{num(p99, '{:.1f}')} ms at {num(get(dflt['open'], 'config', 'rate'))}/s | "
            f"{'n/a' if p99 is None else ('yes' if p99 <= 10 else 'no')} |")
    best = {m: max((max(tput[(m, w)][0] or 0, tput[(m, w)][1] or 0) for w in WORKERS), default=0)
            for m, _ in MODES}
    bbest = {m: max((tput[(m, w)][3] or 0 for w in WORKERS), default=0) for m, _ in MODES}
    for m, label in MODES:
        rc = get(raw[m], "raw", "creates_per_s")
        ok = rc and best[m] >= rc
        add(f"| tuned: no-op tasks/s ≥ raw creates/s ({label}), one task per node | best {num(best[m])} "
            f"vs {num(rc)} | {'yes' if ok else 'no'} |")
        ok = rc and bbest[m] >= rc
        add(f"| tuned: no-op tasks/s ≥ raw creates/s ({label}), bundles of 64 | best {num(bbest[m])} "
            f"vs {num(rc)} ({bbest[m] / rc if rc else 0:.2f}×) | {'yes' if ok else 'no'} |")
    p99s = [get(o, "load", "latency_ms", "p99") for (_, _, _, _, o, _) in rows]
    p99s = [p for p in p99s if p is not None]
    if p99s:
        worst = max(p99s)
        add(f"| tuned: p99 submit→result at 50% of max ≤ 10 ms | {min(p99s):.1f} to {worst:.1f} ms "
            f"over the {len(p99s)} configurations | {'yes' if worst <= 10 else 'no'} |")
    add(f"| event-loop lag p99 ≤ 2 ms, saturated pool | "
        f"{'n/a' if lag_ms is None else f'{lag_ms:.2f} ms'} | "
        f"{'n/a' if lag_ms is None else ('yes' if lag_ms <= 2 else 'no')} |")
    try:
        idle_mb = int(idle_kb) / 1024
        add(f"| idle zkd < 30 MB RSS | {idle_mb:.1f} MB | {'yes' if idle_mb < 30 else 'no'} |")
    except ValueError:
        add("| idle zkd < 30 MB RSS | n/a | n/a |")
    add(f"| master memory per pending task ≤ 200 bytes | "
        f"{'n/a' if per_task is None else f'{per_task:,.0f} bytes'} | "
        f"{'n/a' if per_task is None else ('yes' if per_task <= 200 else 'no')} |")
    wpt = [get(c, "load", "zookeeper", "writes_per_task") for (m, _, _, c, _, _) in rows]
    wpt = [x for x in wpt if x is not None]
    if wpt:
        add(f"| ZooKeeper writes per task, steady state (closed loop) | {min(wpt):.2f} to "
            f"{max(wpt):.2f} | (reported) |")
    add("")

    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(lines))

    # Plot data: workers, then for each mode burst, closed, raw creates/s.
    with open(os.path.join(out, "throughput.dat"), "w") as f:
        f.write("# workers fsync_burst fsync_closed fsync_raw nosync_burst nosync_closed "
                "nosync_raw fsync_bundled nosync_bundled\n")
        for w in WORKERS:
            vals = []
            bundled = []
            for m, _ in MODES:
                b, c, r, bd = tput.get((m, w), (None, None, None, None))
                vals += [b, c, r]
                bundled.append(bd)
            vals += bundled
            f.write(" ".join([str(w)] + ["NaN" if v is None else f"{v:.1f}" for v in vals]) + "\n")
    print(f"report: {os.path.join(out, 'results.md')}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: bench/report.py RESULTS_DIR", file=sys.stderr)
        sys.exit(2)
    main(sys.argv[1])
