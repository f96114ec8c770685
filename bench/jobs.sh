#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Workflows and delayed tasks (docs/workflows.md, docs/protocol.md §4.3):
#   - a chain of CHAIN echo steps: time per step;
#   - a fan-in of FANIN echo steps into one (a chord), and a map of FANIN elements into one:
#     from the submit to the workflow's end (the fan-in's result);
#   - the lateness of LATE delayed tasks due over 5 s with a free worker (started_ms - due);
#   - the elected master's CPU and RSS with PARK delayed tasks waiting (due in an hour).
# Usage: bench/jobs.sh [--only PARTS] [--nodes N] [BUILD_DIR (default build/release)]
#                      [CHAIN (400)] [FANIN (1000)] [LATE (2000)] [PARK (100000)]
#   --only PARTS  a comma-separated list of chain, fanin, map, late, park (default: all);
#                 chain also prints where a step's time goes (bench/zk_txnlog.py, from
#                 the ZooKeeper transaction log);
#   --nodes N     N members with the defaults (`zkd run`: each a master candidate and a
#                 worker) instead of the master that never works and the one worker.
# Needs python3, curl and jq; starts its own ZooKeeper (zkd-zk-local: one member, no fsync),
# a master (--role standby, so that it never works) and a worker (--role worker, --capacity
# 64, --threads 2, --http for bench/jobs.py). Prints one line per figure.
set -euo pipefail
cd "$(dirname "$0")/.."
only=chain,fanin,map,late,park
nodes=0
while [ $# -gt 0 ]; do
    case "$1" in
        --only) only=$2; shift 2 ;;
        --nodes) nodes=$2; shift 2 ;;
        -h|--help) sed -n '3,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) break ;;
    esac
done
want() { [[ ",$only," == *",$1,"* ]]; }
build=${1:-build/release}
chain=${2:-400}
fanin=${3:-1000}
late=${4:-2000}
park=${5:-100000}
zkd=$build/src/zkd
zklocal=$build/tools/zk_local/zkd-zk-local
dir=$(mktemp -d "${TMPDIR:-/tmp}/zkd-bench-jobs-XXXXXX")
pids=()
# Stops every member at once (each drains); one still there after 30 s is killed.
stop_all() {
    local p i
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do
        for i in $(seq 300); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$p" 2>/dev/null && echo "jobs.sh: pid $p still there 30 s after SIGTERM: killed" >&2
        kill -KILL "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
}
cleanup() {
    stop_all
    "$zklocal" stop --dir "$dir/zk" >/dev/null 2>&1 || true
    rm -rf "$dir"
}
trap cleanup EXIT
tick=$(getconf CLK_TCK)
page=$(getconf PAGESIZE)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss() { awk -v p="$page" '{print $2 * p}' "/proc/$1/statm"; }
now() { date +%s.%N; }
secs() { python3 -c "print(f'{$2 - $1:.3f}')"; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

connect=$("$zklocal" start --dir "$dir/zk" 2>/dev/null)
ns=jobs
http=$(free_port)
if [ "$nodes" -gt 0 ]; then
    "$zkd" run --zk "$connect" --namespace $ns --http "127.0.0.1:$http" --log-level warn \
        >"$dir/node0.log" 2>&1 &
    master=$!
    pids+=("$master")
    sleep 2
    for i in $(seq 1 $((nodes - 1))); do
        "$zkd" run --zk "$connect" --namespace $ns --log-level warn >"$dir/node$i.log" 2>&1 &
        pids+=("$!")
    done
    sleep 2
else
    "$zkd" run --zk "$connect" --namespace $ns --role standby --log-level warn \
        >"$dir/master.log" 2>&1 &
    master=$!
    pids+=("$master")
    sleep 2
    "$zkd" run --zk "$connect" --namespace $ns --role worker --capacity 64 --threads 2 \
        --http "127.0.0.1:$http" --log-level warn >"$dir/worker.log" 2>&1 &
    pids+=("$!")
fi
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$http/v1/cluster" >/dev/null && break; sleep 0.1; done
z=(--zk "$connect" --namespace $ns)
echo "jobs.sh: $(nproc) cores, $([ "$nodes" -gt 0 ] && echo "$nodes nodes" || echo "1 master, 1 worker"), load average $(cut -d' ' -f1-3 /proc/loadavg); $zkd"

# run_workflow NAME SPEC: submits it, waits for its end, prints the seconds it took; the
# workflow's id in $dir/NAME.id.
run_workflow() {
    local t0 t1 out
    t0=$(now)
    out=$("$zkd" workflow run "$2" --wait --json "${z[@]}")
    t1=$(now)
    status=$(jq -r .status <<<"$out")
    [ "$status" = succeeded ] || { echo "$1: $status" >&2; exit 1; }
    jq -r .id <<<"$out" >"$dir/$1.id"
    secs "$t0" "$t1"
}

if want chain; then
    python3 - "$chain" >"$dir/chain.json" <<'PY'
import json, sys
n = int(sys.argv[1])
steps = {f"s{i:05d}": {"type": "echo", "args": i} for i in range(n)}
for i in range(1, n):
    steps[f"s{i:05d}"]["after"] = [f"s{i-1:05d}"]
print(json.dumps({"name": "chain", "steps": steps}))
PY
    s=$(run_workflow chain "$dir/chain.json")
    echo "chain of $chain steps: ${s} s, $(python3 -c "print(f'{$s / $chain * 1000:.1f}')") ms per step"
    id=$(cat "$dir/chain.id")
    echo "chain steps (ms; bench/zk_txnlog.py): $(python3 bench/zk_txnlog.py chain "$(echo "$dir"/zk/server*/data)" "${id##*-}")"
fi

if want fanin; then
    python3 - "$fanin" >"$dir/chord.json" <<'PY'
import json, sys
n = int(sys.argv[1])
steps = {f"s{i:05d}": {"type": "echo", "args": i} for i in range(n)}
steps["total"] = {"type": "echo", "args": {}, "after": list(steps)}
print(json.dumps({"name": "chord", "steps": steps}))
PY
    s=$(run_workflow chord "$dir/chord.json")
    echo "fan-in of $fanin steps into 1: ${s} s from the submit to the fan-in's result"
fi

if want map; then
    python3 - "$fanin" >"$dir/map.json" <<'PY'
import json, sys
n = int(sys.argv[1])
print(json.dumps({"name": "map", "steps": {
    "fetch": {"type": "echo", "args": list(range(n))},
    "each": {"type": "echo", "map": "fetch"},
    "total": {"type": "echo", "args": {}, "after": ["each"]}}}))
PY
    s=$(run_workflow map "$dir/map.json")
    echo "map of $fanin elements into 1: ${s} s from the submit to the fan-in's result"
fi

if want late; then
    out=$(python3 bench/jobs.py lateness "127.0.0.1:$http" "$late" 5000 2000)
    echo "delayed lateness, $late tasks due over 5 s, one free worker: $out"
fi

if want park; then
    sleep 5
    r0=$(rss "$master")
    c0=$(cpu "$master")
    t0=$(now)
    sleep 20
    c1=$(cpu "$master")
    t1=$(now)
    idle=$(python3 -c "print(f'{($c1 - $c0) / $tick / ($t1 - $t0) * 100:.2f}')")
    out=$(python3 bench/jobs.py park "127.0.0.1:$http" "$park" 3600000)
    echo "parked $park delayed tasks (due in 1 h): $out"
    sleep 10
    r1=$(rss "$master")
    c0=$(cpu "$master")
    t0=$(now)
    sleep 30
    c1=$(cpu "$master")
    t1=$(now)
    r2=$(rss "$master")
    waiting=$(python3 -c "print(f'{($c1 - $c0) / $tick / ($t1 - $t0) * 100:.2f}')")
    echo "master idle: CPU $idle% of a core, RSS $((r0 / 1024)) KiB"
    echo "master with $park delayed tasks waiting: CPU $waiting% of a core over 30 s, RSS $((r1 / 1024)) KiB 10 s after the submits, $((r2 / 1024)) KiB 40 s after; $(( (r2 - r0) / park )) B per delayed task"
fi
