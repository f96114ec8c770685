#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The backlog scenario (not a test): N pending tasks and no workers, then workers join.
# Starts its own ZooKeeper (zkd-zk-local, its default heap unless --heap), a master and a
# standby (`zkd run --capacity 0`, the master with --http), submits N no-op tasks with
# `zkd-loadgen --submit-only --allow-no-workers`, and measures:
#   - ZooKeeper's heap after a full GC (jcmd GC.run + GC.heap_info) before and after: bytes
#     per pending task; the master's RSS before and after: bytes per pending task;
#   - how long `zkd tasks`, `zkd cluster`, GET /v1/cluster and GET /v1/tasks take to answer;
#   - SIGKILL of the master with workers joining at the same moment: the time until the
#     first task is done (the standby takes over once the dead master's session expires:
#     the session timeout, 6 s by default, is part of it: kill_to_standby_elected_s);
#   - the drain: how many tasks are done per second, and whether all N are (no pending,
#     none held, N results) within --drain-limit; if not, how long the rest would take.
# Usage: bench/backlog.sh [--tasks N] [--workers W] [--heap SIZE] [--build DIR] [--out DIR]
#                         [--session-timeout DUR] [--drain-limit S] [--perf S]
#   --tasks N            pending tasks (default 200000)
#   --workers W          `zkd run` processes with default options that join (default 4)
#   --heap SIZE          zkd-zk-local start --heap (default: its own, from the machine)
#   --build DIR          where the binaries are (default build/release, built if missing)
#   --out DIR            results (default bench/results/backlog-<date>-<N>)
#   --session-timeout D  the master's and standby's session timeout (default: zkd's, 6s)
#   --drain-limit S      stop watching the drain after S seconds (default 600) and report the
#                        rate so far and the time the rest would take at that rate
#   --perf S             `perf record -g` the standby for S seconds from the kill
#                        (takeover.perf.data in --out; perf report -i it)
# Writes summary.txt (one "key value" line per figure), the raw outputs and the zkd processes'
# logs to --out.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

tasks=200000
workers=4
heap=""
build=build/release
out=""
session=""
drain_limit=600
perf_s=""
while [ $# -gt 0 ]; do
    case "$1" in
        --tasks) shift; tasks=${1:?} ;;
        --workers) shift; workers=${1:?} ;;
        --heap) shift; heap=${1:?} ;;
        --build) shift; build=${1:?} ;;
        --out) shift; out=${1:?} ;;
        --session-timeout) shift; session=${1:?} ;;
        --drain-limit) shift; drain_limit=${1:?} ;;
        --perf) shift; perf_s=${1:?} ;;
        -h|--help) awk 'NR > 2 && /^#/ { sub(/^# ?/, ""); print; next } NR > 2 { exit }' "$0"; exit 0 ;;
        *) echo "bench/backlog.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done

# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
bench_binaries "$build"

[ -n "$out" ] || out=bench/results/backlog-$(date +%Y-%m-%d)-$tasks
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/zkd-backlog-XXXXXX")
zkdir=$work/zk
nodes=()
cleanup() {
    for pid in "${nodes[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${nodes[@]}"; do wait "$pid" 2>/dev/null || true; done
    cp "$work"/*.log "$out/" 2>/dev/null || true
    "$zklocal" stop --dir "$zkdir" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

summary=$out/summary.txt
: >"$summary"
say() { echo "$1 $2" >>"$summary"; echo "   $1 $2"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# The JVM's used heap in kB after a full collection (young + old generation).
zk_heap_kb() {
    jcmd "$1" GC.run >/dev/null 2>&1 || true
    jcmd "$1" GC.heap_info 2>/dev/null | awk '
        /generation/ { for (i = 1; i <= NF; i++) if ($i == "used") { v = $(i + 1); sub(/K,?$/, "", v); t += v } }
        END { print t + 0 }'
}
four() { /usr/bin/python3 - "$connect" "$1" <<'PY'
import socket, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=10)
s.sendall(sys.argv[2].encode())
data = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    data += b
print(data.decode(errors="replace"))
PY
}
# Runs a command with a time limit, its stdout to file $1; prints its wall time in s, or
# "failed(<exit>,<time>s)".
timed() {
    local file=$1 t0 rc=0
    shift
    t0=$(now)
    timeout 300 "$@" >"$file" 2>"$file.err" || rc=$?
    if [ "$rc" = 0 ]; then since "$t0"; else echo "failed($rc,$(since "$t0")s)"; fi
}

flags=()
[ -n "$heap" ] && flags=(--heap "$heap")
connect=$("$zklocal" start --dir "$zkdir" "${flags[@]}" 2>/dev/null)
zk_pid=$("$zklocal" status --dir "$zkdir" | awk '/running pid/ { print $5; exit }')
xmx=$(tr '\0' '\n' <"/proc/$zk_pid/cmdline" | grep '^-Xmx' || true)
echo "== backlog of $tasks tasks; ZooKeeper at $connect (pid $zk_pid, $xmx)"
{
    echo "date $(date -Iseconds)"
    echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "machine $(nproc) cores, $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo), load $(cut -d' ' -f1-3 /proc/loadavg)"
} >>"$summary"
say tasks "$tasks"
say zk_heap_max "${xmx#-Xmx}"

ns=backlog
run_flags=()
[ -n "$session" ] && run_flags=(--session-timeout "$session")
http=$(free_port)
"$zkd" run --zk "$connect" --namespace "$ns" --host master --capacity 0 --log-level info \
    --http "127.0.0.1:$http" "${run_flags[@]}" >>"$work/master.log" 2>&1 &
master=$!
nodes+=("$master")
for _ in $(seq 1 200); do grep -q "elected\|took over" "$work/master.log" 2>/dev/null && break; sleep 0.1; done
"$zkd" run --zk "$connect" --namespace "$ns" --host standby --capacity 0 --log-level info \
    "${run_flags[@]}" >>"$work/standby.log" 2>&1 &
standby=$!
nodes+=("$standby")
sleep 3
heap0=$(zk_heap_kb "$zk_pid")
rss0=$(rss_kb "$master")
say zk_heap_used_kb_before "$heap0"
say master_rss_kb_before "$rss0"

echo "== submitting $tasks tasks (no workers)"
t0=$(now)
rc=0
"$loadgen" --zk "$connect" --namespace "$ns" --no-progress --json --submit-only \
    --allow-no-workers --tasks "$tasks" --concurrency 5000 --batch 100 \
    >"$out/submit.json" 2>"$out/submit.err" || rc=$?
say submit_s "$(since "$t0")"
say submit_exit "$rc"
if [ "$rc" != 0 ]; then
    echo "   zkd-loadgen failed (exit $rc): $(tail -3 "$out/submit.err")"
    if ! kill -0 "$zk_pid" 2>/dev/null; then
        say zk_alive no
        grep -m3 -i "OutOfMemory" "$zkdir/server1/server.log" >>"$summary" || true
        echo "== ZooKeeper died: see $summary"
        exit 1
    fi
fi
say zk_alive "$(kill -0 "$zk_pid" 2>/dev/null && echo yes || echo no)"
submitted=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["load"]["submitted"])' "$out/submit.json" 2>/dev/null || echo 0)
say submitted "$submitted"

# The master has taken in the backlog when its RSS stops growing.
last=0; same=0
for _ in $(seq 1 600); do
    now_kb=$(rss_kb "$master")
    if [ "$now_kb" = "$last" ]; then same=$((same + 1)); else same=0; fi
    [ "$same" -ge 6 ] && break
    last=$now_kb
    sleep 0.5
done
rss1=$(rss_kb "$master")
heap1=$(zk_heap_kb "$zk_pid")
say master_rss_kb_after "$rss1"
say zk_heap_used_kb_after "$heap1"
per() { awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN { if (n > 0) printf "%.0f", (b - a) * 1024 / n; else print "n/a" }'; }
say master_bytes_per_pending_task "$(per "$rss0" "$rss1" "$submitted")"
say zk_heap_bytes_per_pending_task "$(per "$heap0" "$heap1" "$submitted")"
four mntr >"$out/mntr.txt"
say zk_znode_count "$(awk '$1 == "zk_znode_count" { print $2 }' "$out/mntr.txt")"
say zk_approximate_data_size "$(awk '$1 == "zk_approximate_data_size" { print $2 }' "$out/mntr.txt")"

echo "== reading it back"
say zkd_tasks_s "$(timed "$out/tasks.json" "$zkd" tasks --zk "$connect" --namespace "$ns" --json)"
say zkd_cluster_s "$(timed "$out/cluster.json" "$zkd" cluster --zk "$connect" --namespace "$ns" --json)"
say http_cluster_s "$(timed "$out/http_cluster.json" curl -sf "http://127.0.0.1:$http/v1/cluster")"
say http_tasks_s "$(timed "$out/http_tasks.json" curl -sf "http://127.0.0.1:$http/v1/tasks?limit=1000")"
say cluster_pending "$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pending"])' "$out/cluster.json" 2>/dev/null || echo n/a)"

echo "== SIGKILL the master; $workers workers join at the same moment"
worker_ports=()
t_kill=$(now)
kill -KILL "$master"
wait "$master" 2>/dev/null || true
if [ -n "$perf_s" ]; then
    perf record -g -o "$out/takeover.perf.data" -p "$standby" -- sleep "$perf_s" \
        >"$out/perf.err" 2>&1 &
fi
for i in $(seq 1 "$workers"); do
    p=$(free_port)
    worker_ports+=("$p")
    "$zkd" run --zk "$connect" --namespace "$ns" --host "w$i" --log-level warn \
        --http "127.0.0.1:$p" >>"$work/w$i.log" 2>&1 &
    nodes+=($!)
done
done_count() {
    local p t=0 v
    for p in "${worker_ports[@]}"; do
        v=$(curl -sf "http://127.0.0.1:$p/metrics" 2>/dev/null \
            | awk '/^zkd_tasks_completed_total/ { s += $2 } END { print s + 0 }') || v=0
        t=$((t + ${v:-0}))
    done
    echo "$t"
}
first=""
elected=""
for _ in $(seq 1 1200); do
    if [ -z "$elected" ] && grep -q "elected master" "$work/standby.log"; then
        elected=$(since "$t_kill")
    fi
    if [ "$(done_count)" -gt 0 ]; then first=$(since "$t_kill"); break; fi
    sleep 0.05
done
# The standby is elected once the dead master's session expires (the session timeout): the
# rest of the failover is its takeover.
say kill_to_standby_elected_s "${elected:-not seen}"
say kill_to_first_task_done_s "${first:-none within 60 s}"
say standby_rss_kb_as_master "$(rss_kb "$standby")"

echo "== drain (watched for at most $drain_limit s)"
t_drain=$(now)
drained=no
pend=n/a; held=n/a; res=0; res0=""
: >"$out/drain.txt"   # seconds since the drain started, pending, held, results
while awk -v a="$(since "$t_drain")" -v l="$drain_limit" 'BEGIN { exit !(a < l) }'; do
    if timeout 60 "$zkd" cluster --zk "$connect" --namespace "$ns" --json >"$out/cluster_drain.json" 2>/dev/null; then
        state=$(/usr/bin/python3 - "$out/cluster_drain.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
held = sum(w.get("assigned", 0) + w.get("running", 0) for w in c.get("workers", []))
print(c.get("pending", -1), held, c.get("results", -1))
PY
)
        read -r pend held res <<<"$state"
        [ -n "$res0" ] || res0=$res
        echo "$(since "$t_drain") $pend $held $res" >>"$out/drain.txt"
        if [ "$pend" = 0 ] && [ "$held" = 0 ] && [ "$res" -ge "$submitted" ]; then drained=yes; break; fi
    fi
    sleep 5
done
drain_s=$(since "$t_drain")
say drain_watched_s "$drain_s"
say drained "$drained"
say drain_pending_held_results "$pend $held $res"
rate=$(awk -v a="${res0:-0}" -v b="$res" -v t="$drain_s" 'BEGIN { if (t > 0) printf "%.1f", (b - a) / t; else print 0 }')
say drain_tasks_per_s "$rate"
if [ "$drained" = no ]; then
    say drain_rest_would_take_s "$(awk -v r="$rate" -v p="$pend" 'BEGIN { if (r > 0) printf "%.0f", p / r; else print "never" }')"
fi
say tasks_done_by_workers "$(done_count)"
echo "== done: $summary"
