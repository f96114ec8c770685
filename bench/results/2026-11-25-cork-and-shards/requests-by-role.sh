#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Where the requests of an open loop go, by role (session 15): one fsync zkd-zk-local, 4 zkd
# run with --http (for /metrics), a warm-up (4,000 tasks at 16 in flight, 10 s at RATE), then
# 10 s at RATE with: the nodes' change-log counters (zkd_change_log_reads_total,
# zkd_directory_listings_total, zkd_task_reads_total) before and after; requests per session
# from ZooKeeper's `cons` (9.5 s); a 5 s packet capture decoded by ops.py (op types per
# connection); the CPU ticks of ZooKeeper and of each node; zkd-loadgen's report.
# Usage: requests-by-role.sh OUT_DIR   (R=build dir, default build/release; RATE, default 2000)
set -u
here=$(cd "$(dirname "$0")" && pwd)
R=${R:-build/release}; out=${1:?out dir}; rate=${RATE:-2000}; rm -rf "$out"; mkdir -p "$out"
C=$($R/tools/zk_local/zkd-zk-local start --dir "$out/zk" --force-sync 2>/dev/null)
P=${C##*:}
cons() { python3 -c 'import socket,sys
s=socket.create_connection(("127.0.0.1",int(sys.argv[1]))); s.sendall(b"cons"); d=b""
while True:
    x=s.recv(65536)
    if not x: break
    d+=x
print(d.decode())' "$P"; }
metrics() { for i in 1 2 3 4; do curl -s "127.0.0.1:$((18080 + i))/metrics" |
    grep -E "^zkd_(change_log_reads|directory_listings|task_reads)_total" | sed "s/^/n$i /"; done; }
pids=()
for i in 1 2 3 4; do
    $R/src/zkd run --zk "$C" --namespace x --host "x-$i" --log-level warn \
        --http "127.0.0.1:$((18080 + i))" >>"$out/n$i.log" 2>&1 & pids+=($!)
done
LG=($R/tools/loadgen/zkd-loadgen --zk "$C" --namespace x --no-progress)
"${LG[@]}" --workers 4 --wait-workers 30000 --tasks 4000 --concurrency 16 >/dev/null
"${LG[@]}" --duration 10 --rate "$rate" >/dev/null
metrics >"$out/metrics-before"; cons >"$out/cons-before"
"${LG[@]}" --duration 10 --rate "$rate" >"$out/loadgen.txt" & lg=$!
sleep 2
timeout 5 tcpdump -i lo -n -s 0 -w "$out/cap.pcap" \
    "tcp dst port $P and tcp[tcpflags] & tcp-push != 0" 2>"$out/tcpdump.err"
sleep 2.5; cons >"$out/cons-after"; wait $lg
metrics >"$out/metrics-after"
{
    awk '{print "zookeeper cpu ticks (whole run)", $14+$15}' \
        "/proc/$(pgrep -f "$out/zk/server1/zoo.cfg" | head -1)/stat"
    for p in "${pids[@]}"; do awk '{printf "%s ", $14+$15}' "/proc/$p/stat"; done
    echo " : cpu ticks of the 4 nodes (whole run)"
} >"$out/cpu.txt"
kill "${pids[@]}"; wait "${pids[@]}" 2>/dev/null
$R/tools/zk_local/zkd-zk-local stop --dir "$out/zk" >/dev/null 2>&1
tasks=$((rate * 10))
python3 - "$out" "$tasks" "$((rate * 95 / 10))" <<'PY' >"$out/summary.txt"
import collections, re, sys
out, tasks, cons_tasks = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
def read(f):
    d = {}
    for line in open(f"{out}/{f}"):
        node, metric, value = line.split()
        d[(node, metric)] = float(value)
    return d
a, b = read("metrics-before"), read("metrics-after")
tot = collections.Counter()
for k, v in b.items():
    tot[k[1]] += v - a.get(k, 0)
for m, v in sorted(tot.items()):
    print(f"{m:<58} {v / tasks:.3f}/task")
def cons(f):
    return {m.group(3): int(m.group(1)) for m in
            re.finditer(r"recved=(\d+),sent=(\d+),sid=(0x[0-9a-f]+)", open(f"{out}/{f}").read())}
c0, c1 = cons("cons-before"), cons("cons-after")
for sid, n in sorted(c1.items(), key=lambda kv: -kv[1]):
    if n - c0.get(sid, 0) > 20:
        print(f"session {sid}: {(n - c0.get(sid, 0)) / cons_tasks:.2f} requests/task")
PY
tcpdump -r "$out/cap.pcap" -n -x 2>/dev/null | python3 "$here/ops.py" "$P" "$((rate * 5))" >>"$out/summary.txt"
cat "$out/cpu.txt" >>"$out/summary.txt"
grep -E "latency|stages|submit\(\)|mntr|this client" "$out/loadgen.txt" >>"$out/summary.txt"
cat "$out/summary.txt"
