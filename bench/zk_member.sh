#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# One ZooKeeper member down, and a member restart under load (docs/chaos.md): a 3-member
# ensemble (zkd-zk-local) and 4 `zkd run` (session timeout 4 s); zkd-loadgen's throughput
# (closed loop, 64 in flight) and an open loop at RATE tasks/s, with all members up and
# with one follower stopped; then one follower killed and restarted while the open loop
# runs, timed, with its phases from its own server.log.
# Usage: bench/zk_member.sh [BUILD_DIR (default build/release)] [SECONDS per load (20)] [RATE (200)]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
secs=${2:-20}
rate=${3:-200}
zkl=$build/tools/zk_local/zkd-zk-local
zkd=$build/src/zkd
lg=$build/tools/loadgen/zkd-loadgen
dir=$(mktemp -d "${TMPDIR:-/tmp}/zkd-bench-zkm-XXXXXX")
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    "$zkl" stop --dir "$dir/zk" >/dev/null 2>&1 || true
    echo "logs in $dir" >&2
}
trap cleanup EXIT
cs=$("$zkl" start --servers 3 --dir "$dir/zk")
for i in 1 2 3 4; do
    "$zkd" run --zk "$cs" --namespace zkm --session-timeout 4s --capacity 2 --threads 1 \
        --host "n$i" >"$dir/zkd$i.log" 2>&1 &
    pids+=($!)
done
follower() { "$zkl" status --dir "$dir/zk" | awk '/mode follower/ {sub(":", "", $2); print $2; exit}'; }
load() {  # label, then zkd-loadgen flags
    local label=$1; shift
    echo "== $label" >&2
    "$lg" --zk "$cs" --namespace zkm --workers 4 --duration "${secs}s" "$@" |
        grep -E "tasks/s|latency|errors" | sed "s|^|$label: |"
}
load "3 up, closed loop" --concurrency 64
load "3 up, open loop $rate/s" --rate "$rate"
m=$(follower)
"$zkl" stop-member --dir "$dir/zk" "$m"
load "zk$m down, closed loop" --concurrency 64
load "zk$m down, open loop $rate/s" --rate "$rate"
"$zkl" start-member --dir "$dir/zk" "$m"

# A restart under load: kill a follower 5 s into the open loop, start it 2 s later.
m=$(follower)
"$lg" --zk "$cs" --namespace zkm --workers 4 --duration "$((secs + 10))s" --rate "$rate" \
    >"$dir/restart-load.txt" 2>&1 &
lgpid=$!
sleep 5
"$zkl" kill-member --dir "$dir/zk" "$m"
sleep 2
t0=$(date +%s.%N)
echo "start-member at $(date '+%H:%M:%S.%N' | cut -c1-12)"
"$zkl" start-member --dir "$dir/zk" "$m"
t1=$(date +%s.%N)
wait "$lgpid" || true
echo "restart of zk$m under $rate tasks/s: start-member took $(echo "$t1 - $t0" | bc) s (until it serves)"
log=$dir/zk/server$m/server.log
awk '/===== zk_local: starting/ {n = NR} {line[NR] = $0} END {for (i = n; i <= NR; i++) print line[i]}' "$log" |
    grep -E "Reading configuration|Snapshot loaded|- LOOKING|Peer state changed|LEADER ELECTION TOOK" |
    sed -E 's/^[0-9-]+ ([0-9:,]+) .* - /  \1 /'
grep -E "tasks/s|latency|errors" "$dir/restart-load.txt" | sed 's/^/restart load: /'
