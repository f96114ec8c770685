#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A thousand workers against one master (docs/performance.md, "A thousand workers"): for 4
# workers and for BIG workers, each held by zkd-swarm (one process, one ZooKeeper session per
# worker), against one `zkd run --role standby` master: assignment latency p50/p99 through the
# master (zkd-loadgen --no-direct) and placed directly by the client, the master's CPU per
# task (/proc/PID/stat), memory per worker in zkd-swarm, the /workers listing and the
# server's watches, and the time from a SIGKILL of the master to assignments flowing again
# (a second `zkd run --role standby` takes over). The ratios BIG vs 4 come from the same run.
# Usage: bench/swarm.sh [BUILD_DIR (default build/release)] [BIG (default 1000)]
#                       [RATE (tasks/s, default 200)] [TASKS (per load, default 2000)]
# Starts its own ZooKeeper (zkd-zk-local); the masters' session timeout is 4 s.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# shellcheck source=bench/lib.sh
. bench/lib.sh
build=${1:-build/release}
big=${2:-1000}
rate=${3:-200}
tasks=${4:-2000}
bench_binaries "$build"
swarm=$(dirname "$(dirname "$loadgen")")/swarm/zkd-swarm
if [ ! -x "$swarm" ]; then
    cmake --build "$(dirname "$(dirname "$(dirname "$loadgen")")")" -j 2 --target zkd_swarm
fi
session=4000
dir=$(mktemp -d "${TMPDIR:-/tmp}/zkd-bench-swarm-XXXXXX")
pids=()
stop_all() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null && wait "$p" 2>/dev/null || true; done
    pids=()
}
cleanup() {
    stop_all
    "$zklocal" stop --dir "$dir/zk" >/dev/null 2>&1 || true
    [ -n "${KEEP:-}" ] && echo "outputs kept in $dir" >&2 || rm -rf "$dir"
}
trap cleanup EXIT
tick=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
now_ms() { date +%s%3N; }
# A field of a zkd-loadgen --json report: json_field FILE 'load.latency_ms.p99'.
json_field() {
    python3 - "$1" "$2" <<'EOF'
import json, sys
v = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
for k in sys.argv[2].split('.'):
    v = v[k]
print(v)
EOF
}
# The server's mntr counter $1.
mntr() {
    python3 - "${connect##*:}" "$1" <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"mntr")
data = b""
while chunk := s.recv(65536):
    data += chunk
for line in data.decode().splitlines():
    k, _, v = line.partition("\t")
    if k == sys.argv[2]:
        print(v)
EOF
}

connect=$("$zklocal" start --dir "$dir/zk" 2>/dev/null)
echo "swarm bench: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); rate $rate/s, $tasks tasks per load, masters' session timeout ${session} ms"

declare -A r
for n in 4 "$big"; do
    ns=w$n
    "$zkd" run --zk "$connect" --namespace "$ns" --role standby --host boss-a \
        --session-timeout "${session}ms" --log-level warn >"$dir/$ns-a.log" 2>&1 &
    master=$!
    pids+=("$master")
    sleep 2
    "$swarm" --zk "$connect" --namespace "$ns" --workers "$n" --capacity 4 --json \
        >"$dir/$ns-swarm.out" 2>"$dir/$ns-swarm.log" &
    sw=$!
    pids+=("$sw")
    for _ in $(seq 1 600); do
        grep -q 'workers joined' "$dir/$ns-swarm.out" && break
        sleep 0.1
    done
    r[$n.join]=$(grep -o 'joined in [0-9.]* s' "$dir/$ns-swarm.out" | awk '{print $3}')
    r[$n.per_worker]=$(grep -o '([0-9]* bytes per worker)' "$dir/$ns-swarm.out" | tr -dc 0-9)
    sleep 3
    r[$n.watches]=$(mntr zk_watch_count)
    r[$n.listing]=$("$zkd" cluster --zk "$connect" --namespace "$ns" --json | python3 -c '
import json, sys
w = json.load(sys.stdin)["workers"]
print(sum(len(x["id"]) + 4 for x in w), len(w))')
    r[$n.master_rss0]=$(rss_kb "$master")

    # Through the master: every task goes to pending and the master places it.
    c0=$(cpu "$master")
    "$loadgen" --zk "$connect" --namespace "$ns" --no-direct --rate "$rate" --tasks "$tasks" \
        --workers "$n" --no-progress --no-mntr --json >"$dir/$ns-pending.json" 2>"$dir/$ns-pending.err"
    c1=$(cpu "$master")
    r[$n.cpu]=$(python3 -c "print(f'{($c1 - $c0) / $tick * 1000 / $tasks:.3f}')")
    r[$n.p50]=$(json_field "$dir/$ns-pending.json" load.latency_ms.p50)
    r[$n.p99]=$(json_field "$dir/$ns-pending.json" load.latency_ms.p99)
    r[$n.master_rss]=$(rss_kb "$master")

    # Placed directly by the client.
    "$loadgen" --zk "$connect" --namespace "$ns" --rate "$rate" --tasks "$tasks" --workers "$n" \
        --no-progress --no-mntr --json >"$dir/$ns-direct.json" 2>"$dir/$ns-direct.err"
    r[$n.dp50]=$(json_field "$dir/$ns-direct.json" load.latency_ms.p50)
    r[$n.dp99]=$(json_field "$dir/$ns-direct.json" load.latency_ms.p99)
    r[$n.dcpu]=$(python3 -c "
import json
v = json.loads(open('$dir/$ns-direct.json').read().strip().splitlines()[-1])
p = v['process']
print(f\"{(p['cpu_user_s'] + p['cpu_sys_s']) * 1000 / $tasks:.3f}\")")

    # Failover: a second master waits; the first is SIGKILLed under a load through pending.
    "$zkd" run --zk "$connect" --namespace "$ns" --role standby --host boss-b \
        --session-timeout "${session}ms" --log-level warn >"$dir/$ns-b.log" 2>&1 &
    pids+=("$!")
    sleep 2
    secs=14
    "$loadgen" --zk "$connect" --namespace "$ns" --no-direct --rate 50 --duration "${secs}s" \
        --workers "$n" --no-progress --no-mntr --json --trace "$dir/$ns-trace.txt" \
        >"$dir/$ns-failover.json" 2>"$dir/$ns-failover.err" &
    lg=$!
    sleep 4
    killed=$(now_ms)
    kill -KILL "$master"
    wait "$lg" || true
    r[$n.failover]=$(python3 - "$dir/$ns-trace.txt" "$killed" <<'EOF'
import sys
killed = int(sys.argv[2])
starts = sorted(int(l.split()[2]) for l in open(sys.argv[1]) if not l.startswith("#") and l.split()[2] != "0")
after = [s for s in starts if s > killed]
before = [s for s in starts if s <= killed]
# Assignments flow again: the first task started after the longest pause following the kill.
gaps = [(b - a, b) for a, b in zip([killed] + after, after)]
print(f"{(max(gaps)[1] - killed) / 1000:.2f}" if gaps else "none")
EOF
)
    r[$n.lost]=$(json_field "$dir/$ns-failover.json" load.errors.total)
    stop_all
    r[$n.summary]=$(tail -1 "$dir/$ns-swarm.out")
done

ratio() { python3 -c "a, b = float('$1'), float('$2'); print(f'{b / a:.2f}' if a > 0 else '-')"; }
printf '\n%-44s %12s %12s %8s\n' "" "4 workers" "$big workers" "ratio"
row() { printf '%-44s %12s %12s %8s\n' "$1" "${r[4.$2]}" "${r[$big.$2]}" "$(ratio "${r[4.$2]}" "${r[$big.$2]}")"; }
row "through the master: latency p50 ms" p50
row "through the master: latency p99 ms" p99
row "master CPU per task, ms" cpu
row "placed directly: latency p50 ms" dp50
row "placed directly: latency p99 ms" dp99
row "client (zkd-loadgen) CPU per task, ms" dcpu
row "master RSS after the loads, KiB" master_rss
row "failover: SIGKILL to first assignment, s" failover
row "zkd-swarm: bytes per worker" per_worker
row "zkd-swarm: seconds to join all" join
row "server watches (all sessions)" watches
printf '%-44s %12s %12s\n' "/workers listing bytes, workers" "${r[4.listing]}" "${r[$big.listing]}"
printf '%-44s %12s %12s\n' "failover load: tasks not succeeded" "${r[4.lost]}" "${r[$big.lost]}"
echo "zkd-swarm summaries:"
echo "  4: ${r[4.summary]}"
echo "  $big: ${r[$big.summary]}"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
