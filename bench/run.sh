#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The benchmark suite (not a test): builds zkd (Release, build/release), starts its own local
# ZooKeeper twice (fsync on, then forceSync=no). Against the fsync one, first the *defaults*
# configuration: 4 `zkd run` with default options, no bundles (one task at a time, a burst
# of one task per node 100 per submit call, 1 ms CPU tasks, an open loop at half the burst's
# rate, a light open loop). Then the *tuned* one against each: clusters of 1, 2 and 4
# `zkd run --capacity 64 --threads 2` driven with zkd-loadgen: the raw ceiling, a burst of
# no-op tasks, bundles, a closed loop, an open loop at 50% of the measured maximum, 1 ms CPU
# tasks, a light open loop (the latency floor); then batch sizes, event-loop lag under a
# saturated pool, idle RSS, master memory and ZooKeeper heap per pending task; then (full
# runs) the backlog scenario, bench/backlog.sh. ZooKeeper writes and requests per task are
# the server's own counters (mntr). Writes bench/results/run-<date>/ (results.md, JSON of every
# run, PNG plots) and stops everything it started.
# Usage: bench/run.sh [--quick] [--no-install] [--out DIR] [--backlog N] [--build DIR]
#   --quick       smaller runs (a few minutes instead of about twenty), no backlog
#   --no-install  do not install missing packages (gnuplot-nox, build dependencies)
#   --out DIR     write results to DIR instead of bench/results/run-<date>
#   --backlog N   pending tasks for bench/backlog.sh (default 200000; 0: skip it)
#   --build DIR   use the binaries already built in DIR instead of building build/release
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

quick=0
install=1
out=""
backlog=""
build=""
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick=1 ;;
        --no-install) install=0 ;;
        --out) shift; out=${1:?--out needs a directory} ;;
        --backlog) shift; backlog=${1:?--backlog needs a number} ;;
        --build) shift; build=${1:?--build needs a directory} ;;
        -h|--help) awk 'NR > 2 && /^#/ { sub(/^# ?/, ""); print; next } NR > 2 { exit }' "$0"; exit 0 ;;
        *) echo "bench/run.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done

# --- sizes -----------------------------------------------------------------------------------
if [ "$quick" = 1 ]; then
    burst=5000; closed_s=4; open_s=4; spin_tasks=500; mem_tasks=20000; bundled=20000
    raw_ops=10000; raw_rounds=1; batch_s=3; lag_s=6; one_tasks=200
    backlog=${backlog:-0}
else
    burst=20000; closed_s=10; open_s=10; spin_tasks=2000; mem_tasks=50000; bundled=100000
    raw_ops=20000; raw_rounds=3; batch_s=8; lag_s=8; one_tasks=1000
    backlog=${backlog:-200000}
fi
default_workers=4  # the defaults configuration: this many `zkd run` with no options
worker_counts=(1 2 4)
capacity=64        # slots per worker (echo tasks are instant: slots, not threads, bound them)
threads=2          # compute threads per worker (the machine's cores, usually)
concurrency=128    # the closed loop's tasks in flight

# --- packages and build ----------------------------------------------------------------------
need_pkg() { ! dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q '^install ok installed$'; }
if [ "$install" = 1 ]; then
    tools/install-deps.sh
    if need_pkg gnuplot-nox && ! command -v gnuplot >/dev/null; then
        echo "== installing gnuplot-nox"
        sudo_cmd=()
        [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
        export DEBIAN_FRONTEND=noninteractive
        "${sudo_cmd[@]}" apt-get update -qq
        "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends gnuplot-nox
    fi
fi
command -v gnuplot >/dev/null || echo "bench: gnuplot missing: no plots (install gnuplot-nox)" >&2

if [ -z "$build" ]; then
    echo "== build (build/release)"
    cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF >/dev/null
    cmake --build build/release -j "$(nproc 2>/dev/null || echo 2)" --target zkd zkd_loadgen zkd_zk_local_cli
    build=build/release
fi
case "$build" in /*) ;; *) build=$root/$build ;; esac
zkd=$build/src/zkd
loadgen=$build/tools/loadgen/zkd-loadgen
zklocal=$build/tools/zk_local/zkd-zk-local
for b in "$zkd" "$loadgen" "$zklocal"; do
    [ -x "$b" ] || { echo "bench/run.sh: $b missing (build it, or drop --build)" >&2; exit 2; }
done

# --- where results go ------------------------------------------------------------------------
if [ -z "$out" ]; then
    out=bench/results/run-$(date +%Y-%m-%d)
    if [ -e "$out" ]; then
        n=2
        while [ -e "$out-$n" ]; do n=$((n + 1)); done
        out=$out-$n
    fi
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/zkd-bench-XXXXXX")   # ZooKeeper data (on disk: fsync is real)
echo "== results in $out (scratch in $work)"

# --- cleanup: everything this script started -------------------------------------------------
nodes=()
zkdir=""
cleanup() {
    for pid in "${nodes[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${nodes[@]}"; do wait "$pid" 2>/dev/null || true; done
    nodes=()
    if [ -n "$zkdir" ]; then "$zklocal" stop --dir "$zkdir" >/dev/null 2>&1 || true; fi
    zkdir=""
}
on_exit() { cleanup; rm -rf "$work"; }
trap on_exit EXIT
trap 'exit 130' INT TERM

# --- helpers ---------------------------------------------------------------------------------
tck=$(getconf CLK_TCK)
# CPU seconds (user+system) a process has used so far; 0 when gone.
cpu_of() {
    local s
    s=$(cat "/proc/$1/stat" 2>/dev/null) || { echo 0; return; }
    s=${s##*) }
    # After the comm field: state is field 3, utime 14, stime 15 (1-based in the full line).
    awk -v t="$tck" '{ printf "%.2f", ($12 + $13) / t }' <<<"$s"
}
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }
hwm_kb() { awk '/^VmHWM:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }
sum_cpu() { local t=0 p; for p in "$@"; do t=$(awk -v a="$t" -v b="$(cpu_of "$p")" 'BEGIN { printf "%.2f", a + b }'); done; echo "$t"; }

zk_start() {  # $1: fsync|nosync
    zkdir=$work/zk-$1
    local flags=()
    [ "$1" = fsync ] && flags=(--force-sync)
    connect=$("$zklocal" start --dir "$zkdir" "${flags[@]}" 2>/dev/null)
    zk_pid=$("$zklocal" status --dir "$zkdir" | awk '/running pid/ { print $5; exit }')
    echo "   ZooKeeper ($1) at $connect, pid $zk_pid"
}

start_nodes() {  # $1: namespace, $2: count, $3...: extra flags
    local ns=$1 n=$2 i
    shift 2
    for i in $(seq 1 "$n"); do
        "$zkd" run --zk "$connect" --namespace "$ns" --host "$ns-n$i" --log-level "${loglevel:-warn}" \
            --capacity "$capacity" --threads "$threads" "$@" >>"$work/$ns-n$i.log" 2>&1 &
        nodes+=($!)
    done
}

# `zkd run` with default options (the defaults configuration): $1 namespace, $2 count.
start_default_nodes() {
    local ns=$1 n=$2 i
    for i in $(seq 1 "$n"); do
        "$zkd" run --zk "$connect" --namespace "$ns" --host "$ns-n$i" --log-level warn \
            >>"$work/$ns-n$i.log" 2>&1 &
        nodes+=($!)
    done
}

# The JVM's used heap in kB after a full collection (young + old generation); 0 if unknown.
zk_heap_kb() {
    jcmd "$1" GC.run >/dev/null 2>&1 || true
    jcmd "$1" GC.heap_info 2>/dev/null | awk '
        /generation/ { for (i = 1; i <= NF; i++) if ($i == "used") { v = $(i + 1); sub(/K,?$/, "", v); t += v } }
        END { print t + 0 }'
}

stop_nodes() {
    for pid in "${nodes[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${nodes[@]}"; do wait "$pid" 2>/dev/null || true; done
    nodes=()
}

# Runs zkd-loadgen; its JSON goes to $1, with the CPU each side used meanwhile in $1.cpu
# (zk_cpu_s zkd_cpu_s wall_s); a `top` snapshot in $1.top. Never fails the script.
run_load() {
    local file=$1
    shift
    local zk0 zkd0 t0 t1
    zk0=$(cpu_of "$zk_pid"); zkd0=$(sum_cpu "${nodes[@]}"); t0=$(date +%s.%N)
    ( sleep 2; top -b -n1 -w 200 2>/dev/null | head -25 >"$file.top" ) &
    local topper=$!
    "$loadgen" --zk "$connect" --no-progress --json --wait-workers 30000 "$@" >"$file" \
        2>"$file.err" || true
    wait "$topper" 2>/dev/null || true
    t1=$(date +%s.%N)
    echo "$(awk -v a="$zk0" -v b="$(cpu_of "$zk_pid")" 'BEGIN { printf "%.2f", b - a }')" \
         "$(awk -v a="$zkd0" -v b="$(sum_cpu "${nodes[@]}")" 'BEGIN { printf "%.2f", b - a }')" \
         "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')" >"$file.cpu"
}

# A field of a loadgen JSON file by dotted path ("load.tasks_per_s"); "n/a" when missing.
jget() {
    /usr/bin/python3 - "$1" "$2" <<'PY' 2>/dev/null || echo n/a
import json, sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."):
    v = v[k]
print(v)
PY
}
# tasks/s of a loadgen JSON file (0 when missing).
tps() { local v; v=$(jget "$1" load.tasks_per_s); [ "$v" = n/a ] && v=0; echo "$v"; }

# --- machine ---------------------------------------------------------------------------------
{
    echo "date: $(date -Iseconds)"
    echo "nproc: $(nproc)"
    echo "cpu: $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)"
    echo "memory: $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
    echo "kernel: $(uname -r)"
    echo "zookeeper: $(dpkg-query -W -f='${Version}' zookeeper 2>/dev/null || echo unknown)"
    echo "java: $(java -version 2>&1 | head -1)"
    echo "binaries: $build"
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with local changes)')"
    echo "mode: $([ "$quick" = 1 ] && echo quick || echo full)"
    echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine skews every figure)"
    echo "sizes: burst $burst, bundled $bundled, closed ${closed_s}s at concurrency $concurrency, open ${open_s}s, spin:1 x $spin_tasks, one at a time $one_tasks, memory $mem_tasks tasks, backlog $backlog"
    echo "defaults: $default_workers x zkd run with default options (fsync ZooKeeper)"
    echo "tuned: per worker --capacity $capacity --threads $threads"
} >"$out/machine.txt"
cat "$out/machine.txt"

# --- the matrix: sync mode x workers ---------------------------------------------------------
for mode in fsync nosync; do
    echo "== ZooKeeper with $([ "$mode" = fsync ] && echo 'fsync (forceSync=yes)' || echo 'forceSync=no')"
    zk_start "$mode"
    mkdir -p "$out/$mode"
    echo "-- raw ceiling"
    run_load "$out/$mode/raw.json" --raw --raw-ops "$raw_ops" --raw-rounds "$raw_rounds"
    echo "   creates/s $(jget "$out/$mode/raw.json" raw.creates_per_s)," \
         "multi/s $(jget "$out/$mode/raw.json" raw.multis_per_s)" \
         "($(jget "$out/$mode/raw.json" raw.creates_in_multis_per_s) creates/s inside multis)"
    if [ "$mode" = fsync ]; then
        # The defaults configuration: what a user gets who runs `zkd run` with no options.
        d=$out/defaults
        ns=defaults
        mkdir -p "$d"
        echo "-- defaults: $default_workers x \`zkd run\` with default options, no bundles"
        start_default_nodes "$ns" "$default_workers"
        run_load "$d/one.json" --namespace "$ns" --workers "$default_workers" \
            --tasks "$one_tasks" --concurrency 1
        echo "   one at a time: p50 $(jget "$d/one.json" load.latency_ms.p50) ms," \
             "$(jget "$d/one.json" load.zookeeper.writes_per_task) writes/task"
        run_load "$d/burst.json" --namespace "$ns" --tasks "$burst" --concurrency "$burst" \
            --batch 100
        echo "   burst       $(tps "$d/burst.json") tasks/s," \
             "$(jget "$d/burst.json" load.zookeeper.writes_per_task) writes/task"
        run_load "$d/spin.json" --namespace "$ns" --tasks "$spin_tasks" --task spin:1 \
            --concurrency "$concurrency"
        echo "   spin:1      $(tps "$d/spin.json") tasks/s"
        rate=$(awk -v m="$(tps "$d/burst.json")" 'BEGIN { r = m / 2; if (r < 1) r = 1; printf "%.0f", r }')
        run_load "$d/open.json" --namespace "$ns" --duration "$open_s" --rate "$rate" \
            --cdf "$d/open.cdf"
        echo "   open loop at $rate/s: p50 $(jget "$d/open.json" load.latency_ms.p50) ms," \
             "p99 $(jget "$d/open.json" load.latency_ms.p99) ms"
        run_load "$d/light.json" --namespace "$ns" --duration "$open_s" --rate 100
        echo "   open loop at 100/s: p50 $(jget "$d/light.json" load.latency_ms.p50) ms," \
             "p99 $(jget "$d/light.json" load.latency_ms.p99) ms"
        stop_nodes
    fi
    for w in "${worker_counts[@]}"; do
        d=$out/$mode/w$w
        ns=$mode-w$w
        mkdir -p "$d"
        echo "-- $w worker(s)"
        start_nodes "$ns" "$w"
        # Burst: every task submitted at once (100 per submit call), then drained.
        run_load "$d/burst.json" --namespace "$ns" --workers "$w" --tasks "$burst" \
            --concurrency "$burst" --batch 100
        echo "   burst       $(tps "$d/burst.json") tasks/s"
        # Bundled: 256 per submit call, in bundles of 64 (protocol §4.1).
        run_load "$d/bundled.json" --namespace "$ns" --tasks "$bundled" --concurrency 4096 \
            --batch 256 --bundle 64
        echo "   bundled     $(tps "$d/bundled.json") tasks/s (bundles of 64)"
        run_load "$d/closed.json" --namespace "$ns" --duration "$closed_s" \
            --concurrency "$concurrency"
        echo "   closed loop $(tps "$d/closed.json") tasks/s"
        max=$(awk -v a="$(tps "$d/burst.json")" -v b="$(tps "$d/closed.json")" \
            'BEGIN { m = a > b ? a : b; printf "%.0f", m }')
        rate=$(awk -v m="$max" 'BEGIN { r = m / 2; if (r < 1) r = 1; printf "%.0f", r }')
        run_load "$d/open.json" --namespace "$ns" --duration "$open_s" --rate "$rate" \
            --cdf "$d/open.cdf"
        echo "   open loop at $rate/s: p99 $(jget "$d/open.json" load.latency_ms.p99) ms"
        run_load "$d/spin.json" --namespace "$ns" --tasks "$spin_tasks" --task spin:1 \
            --concurrency "$concurrency"
        echo "   spin:1      $(tps "$d/spin.json") tasks/s"
        if [ "$w" = 2 ]; then
            # The latency floor: a light open loop.
            run_load "$d/light.json" --namespace "$ns" --duration "$open_s" --rate 100
            echo "   open loop at 100/s: p50 $(jget "$d/light.json" load.latency_ms.p50) ms," \
                 "p99 $(jget "$d/light.json" load.latency_ms.p99) ms"
        fi
        for pid in "${nodes[@]}"; do hwm_kb "$pid"; done | sort -n | tail -1 >"$d/peak_rss_kb"
        stop_nodes
    done

    if [ "$mode" = nosync ]; then
        echo "-- batch size (2 workers, closed loop)"
        start_nodes nosync-batch 2
        for b in 1 10 100; do
            run_load "$out/$mode/batch$b.json" --namespace nosync-batch --workers 2 \
                --duration "$batch_s" --concurrency 512 --batch "$b"
            echo "   batch $b: $(tps "$out/$mode/batch$b.json") tasks/s," \
                 "$(jget "$out/$mode/batch$b.json" load.zookeeper.writes_per_task) writes/task"
        done
        echo "-- bundle size (2 workers, $bundled tasks, 256 per submit call, 4096 in flight)"
        for b in 1 16 64 256; do
            n=$bundled
            [ "$b" = 1 ] && n=$((bundled / 5))   # unbundled is slow: fewer tasks
            run_load "$out/$mode/bundle$b.json" --namespace nosync-batch --workers 2 \
                --tasks "$n" --concurrency 4096 --batch 256 --bundle "$b"
            echo "   bundle $b: $(tps "$out/$mode/bundle$b.json") tasks/s," \
                 "$(jget "$out/$mode/bundle$b.json" load.zookeeper.reads_per_task) reads/task"
        done
        stop_nodes

        echo "-- idle zkd RSS"
        start_nodes idle 1
        sleep 3
        rss_kb "${nodes[0]}" >"$out/idle_rss_kb"
        echo "   $(cat "$out/idle_rss_kb") kB"
        stop_nodes

        echo "-- master memory per pending task (standby master only, $mem_tasks tasks)"
        capacity=0 loglevel=info start_nodes mem 1
        for _ in $(seq 1 100); do
            grep -q "took over\|elected" "$work/mem-n1.log" 2>/dev/null && break
            sleep 0.1
        done
        sleep 2
        before=$(rss_kb "${nodes[0]}")
        heap_before=$(zk_heap_kb "$zk_pid")
        "$loadgen" --zk "$connect" --namespace mem --no-progress --json --submit-only \
            --allow-no-workers --tasks "$mem_tasks" --concurrency 5000 --batch 100 \
            >"$out/mem_submit.json" 2>"$out/mem_submit.json.err" || true
        # Wait until the master has read them all: its RSS stops growing.
        last=0; same=0
        for _ in $(seq 1 120); do
            now=$(rss_kb "${nodes[0]}")
            if [ "$now" = "$last" ]; then same=$((same + 1)); else same=0; fi
            [ "$same" -ge 6 ] && break
            last=$now
            sleep 0.5
        done
        after=$(rss_kb "${nodes[0]}")
        heap_after=$(zk_heap_kb "$zk_pid")
        echo "$before $after $mem_tasks" >"$out/master_mem.txt"
        echo "$heap_before $heap_after $mem_tasks" >"$out/zk_heap.txt"
        echo "   master RSS $before kB -> $after kB; ZooKeeper heap after GC $heap_before kB -> $heap_after kB"
        stop_nodes

        echo "-- event-loop lag with a saturated compute pool"
        if "$zkd" run --help 2>/dev/null | grep -q -- '--http'; then
            port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
            # One worker whose 2 threads and 2 slots are always busy with 200 ms CPU tasks.
            capacity=2 start_nodes lag 1 --http "127.0.0.1:$port"
            "$loadgen" --zk "$connect" --namespace lag --no-progress --json --task spin:200 \
                --duration "$lag_s" --concurrency 16 --wait-workers 30000 \
                >"$out/lag_load.json" 2>"$out/lag_load.json.err" &
            lagload=$!
            sleep $((lag_s - 2))
            curl -s "http://127.0.0.1:$port/metrics" >"$out/lag_metrics.txt" || true
            wait "$lagload" || true
            grep '^zkd_event_loop_lag_seconds{quantile="0.99"}' "$out/lag_metrics.txt" \
                | awk '{ print $2 }' >"$out/lag_p99_s" || true
            [ -s "$out/lag_p99_s" ] || echo n/a >"$out/lag_p99_s"
            stop_nodes
        else
            echo n/a >"$out/lag_p99_s"
            echo "   n/a: this zkd run has no --http (no /metrics to scrape)"
        fi
        echo "   p99 $(cat "$out/lag_p99_s") s"
    fi
    cleanup
done

# --- the backlog -----------------------------------------------------------------------------
if [ "$backlog" -gt 0 ]; then
    echo "== backlog: $backlog pending tasks (bench/backlog.sh)"
    bench/backlog.sh --tasks "$backlog" --build "$build" --out "$out/backlog" --drain-limit 300 \
        || echo "   bench/backlog.sh failed (exit $?): see $out/backlog/summary.txt"
fi

# --- report ----------------------------------------------------------------------------------
echo "== report"
find "$out" -name '*.err' -empty -delete   # zkd-loadgen's stderr, kept only when it said something
/usr/bin/python3 bench/report.py "$out"
if command -v gnuplot >/dev/null; then
    gnuplot -e "dir='$out'" bench/plots.gp
fi
echo "== done: $out/results.md (nothing left running)"
