#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Schedules (docs/schedules.md): the elected master's CPU with N schedules firing every
# second (their tasks placed by the master on one worker), and the firings' lateness (a
# firing's started_ms - its due time, from the ZooKeeper transaction log: bench/zk_txnlog.py
# firings); against the same task rate submitted by zkd-loadgen through the master
# (--no-direct).
# Usage: bench/schedules.sh [--no-loadgen] [BUILD_DIR (default build/release)] [N (default 1000)]
#                           [SECONDS (default 30)]
#   --no-loadgen  the schedules only.
# Needs python3; starts its own ZooKeeper (zkd-zk-local), a master (--role standby) and a
# worker (--role worker).
set -euo pipefail
cd "$(dirname "$0")/.."
loadgen=1
case "${1:-}" in
    --no-loadgen) loadgen=0; shift ;;
    -h|--help) sed -n '3,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
build=${1:-build/release}
n=${2:-1000}
seconds=${3:-30}
zkd=$build/src/zkd
dir=$(mktemp -d "${TMPDIR:-/tmp}/zkd-bench-schedules-XXXXXX")
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null && wait "$p" 2>/dev/null || true; done
    "$build/tools/zk_local/zkd-zk-local" stop --dir "$dir/zk" >/dev/null 2>&1 || true
    rm -rf "$dir"
}
trap cleanup EXIT
tick=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# One cluster in namespace $1: a master that never works (extra flags $2) and a worker.
cluster() {
    "$zkd" run --zk "$connect" --namespace "$1" --role standby $2 --log-level warn \
        >"$dir/$1-master.log" 2>&1 &
    master=$!
    pids+=("$master")
    sleep 2
    "$zkd" run --zk "$connect" --namespace "$1" --role worker --capacity 256 --threads 2 \
        --log-level warn >"$dir/$1-worker.log" 2>&1 &
    pids+=("$!")
    sleep 2
}
# The master's CPU over $seconds, in % of a core.
measure() {
    local c0 t0 c1 t1
    c0=$(cpu "$master")
    t0=$(date +%s.%N)
    sleep "$seconds"
    c1=$(cpu "$master")
    t1=$(date +%s.%N)
    python3 -c "print(f'{($c1 - $c0) / $tick / ($t1 - $t0) * 100:.1f}')"
}
fired() {
    "$zkd" schedule list --json --zk "$connect" --namespace sched |
        python3 -c 'import json, sys; d = json.load(sys.stdin)["schedules"]; print(sum(s.get("fired", 0) for s in d), sum(s.get("missed", 0) for s in d))'
}

connect=$("$build/tools/zk_local/zkd-zk-local" start --dir "$dir/zk" 2>/dev/null)

cluster sched ""
for i in $(seq 1 "$n"); do
    "$zkd" schedule add "s$i" --every 1s echo "$i" --zk "$connect" --namespace sched >/dev/null
done
echo "schedules.sh: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); $zkd"
sleep 10
since=$(($(date +%s%3N) + 1000))
read -r f0 _ < <(fired)
usage=$(measure)
read -r f1 missed < <(fired)
echo "schedules: $n every 1s: $(( (f1 - f0) / seconds )) firings/s, $missed missed; master CPU $usage% of a core"
sleep 3
echo "lateness of the firings due over the $seconds s (ms): $(python3 bench/zk_txnlog.py firings "$(echo "$dir"/zk/server*/data)" sched "$since")"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
[ "$loadgen" = 1 ] || exit 0
for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null && wait "$p" 2>/dev/null || true; done
pids=()

cluster load "--no-direct"
"$build/tools/loadgen/zkd-loadgen" --zk "$connect" --namespace load --type echo --args 1 \
    --rate "$n" --duration $((seconds + 12)) >"$dir/loadgen.out" 2>&1 &
loadgen=$!
sleep 10
usage=$(measure)
wait "$loadgen"
echo "zkd-loadgen --rate $n through the master (--no-direct): master CPU $usage% of a core"
