#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A/B of the *defaults* configuration (4 `zkd run` with no options, one task per node) for
# two or more builds, against one fsync ZooKeeper, in rounds that alternate the builds, so
# each figure has a baseline from the same run (the machine is noisy: compare within a round).
# Per build and round: one task at a time (300), two bursts of 20,000 no-op tasks (one task
# per submit call, then 100 per call), an open loop for 5 s (by default at half the
# one-task burst's tasks/s of the same build and round), 1,000 spin:1 tasks at 128 in
# flight; tasks/s, latency p50/p99, and ZooKeeper writes and reads per task from the
# server's counters; and per round the raw creates/s of the same server (zkd-loadgen
# --raw), the ratios' base (the bursts' are printed).
# Before the first round, the first build warms the server up in a namespace of its own,
# unmeasured: a burst of 20,000, then an open loop at 1,000/s (a fresh ZooKeeper's JVM still
# compiles its request paths after 60,000 tasks, which the first build measured would pay).
# Usage: bench/ab.sh [--rounds N] [--rate R] [--warmup S] BUILD_DIR...
#   BUILD_DIR  a build with src/zkd, tools/loadgen/zkd-loadgen, tools/zk_local/zkd-zk-local
#              (e.g. a worktree of the baseline commit built with -DCMAKE_BUILD_TYPE=Release)
#   --rounds N rounds (default 2)
#   --warmup S the warm-up's open loop in seconds (default 20; 0: no warm-up)
#   --rate R   the open loop's tasks/s: a number, or `half` (default): half the burst's
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
# shellcheck source=bench/lib.sh
. bench/lib.sh

rounds=2
rate=half
warmup=20
builds=()
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) shift; rounds=${1:?--rounds needs a number} ;;
        --rate) shift; rate=${1:?--rate needs a number or half} ;;
        --warmup) shift; warmup=${1:?--warmup needs a number of seconds} ;;
        -h|--help) awk 'NR > 2 && /^#/ { sub(/^# ?/, ""); print; next } NR > 2 { exit }' "$0"; exit 0 ;;
        -*) echo "bench/ab.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
        *) builds+=("$1") ;;
    esac
    shift
done
case "$rate" in
    half) ;;
    ''|*[!0-9]*|0) echo "bench/ab.sh: --rate takes a positive whole number or 'half', not '$rate'" >&2; exit 2 ;;
esac
case "$warmup" in
    ''|*[!0-9]*) echo "bench/ab.sh: --warmup takes a whole number of seconds, not '$warmup'" >&2; exit 2 ;;
esac
[ "${#builds[@]}" -ge 1 ] || { echo "bench/ab.sh: name at least one build directory (see --help)" >&2; exit 2; }

bench_binaries "${builds[0]}"
bench_zookeeper ab

# A field of a loadgen JSON file by dotted path; n/a when missing.
j() {
    python3 - "$1" "$2" <<'PY' 2>/dev/null || echo n/a
import json, sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."):
    v = v[k]
print(round(v, 2) if isinstance(v, float) else v)
PY
}

# start_nodes NS: 4 `zkd run` with default options in namespace NS.
start_nodes() {
    for i in 1 2 3 4; do
        "$zkd" run --zk "$connect" --namespace "$1" --host "$1-$i" --log-level warn \
            >>"$work/$1-$i.log" 2>&1 &
        nodes+=($!)
    done
}

if [ "$warmup" -gt 0 ]; then
    start_nodes warmup
    "$loadgen" --zk "$connect" --namespace warmup --no-progress --workers 4 --wait-workers 30000 \
        --tasks 20000 --concurrency 20000 >/dev/null 2>&1 || true
    "$loadgen" --zk "$connect" --namespace warmup --no-progress --duration "$warmup" --rate 1000 \
        >/dev/null 2>&1 || true
    stop_nodes
    echo "warmed up: a burst of 20,000 and ${warmup} s at 1,000 tasks/s (not measured)"
fi

printf '%-6s %-28s | %-26s | %-36s | %-18s | %-42s | %s\n' round build "one at a time: p50, w/r" \
    "burst, 1 a call: tasks/s (x raw), w/r" "100 a call (x raw)" "open loop: tasks/s, p50/p99 ms, w/r" \
    "spin:1 tasks/s"
for r in $(seq 1 "$rounds"); do
    bench_binaries "${builds[0]}"
    "$loadgen" --zk "$connect" --no-progress --json --raw --raw-ops 20000 --raw-rounds 1 \
        >"$work/raw.json" 2>/dev/null || true
    echo "round $r: raw creates/s $(j "$work/raw.json" raw.creates_per_s) (the ceiling)"
    for b in "${builds[@]}"; do
        bench_binaries "$b"
        ns=ab$r-$(echo "$b" | tr -c 'a-zA-Z0-9\n' '-' | tail -c 40)
        start_nodes "$ns"
        lg() { "$loadgen" --zk "$connect" --namespace "$ns" --no-progress --json "$@" 2>/dev/null || true; }
        lg --workers 4 --wait-workers 30000 --tasks 300 --concurrency 1 >"$work/one.json"
        lg --tasks 20000 --concurrency 20000 --batch 1 >"$work/burst.json"
        lg --tasks 20000 --concurrency 20000 --batch 100 >"$work/burst100.json"
        open_rate=$rate
        if [ "$rate" = half ]; then
            open_rate=$(python3 -c 'import sys; print(max(1, int(float(sys.argv[1]) / 2)))' \
                "$(j "$work/burst.json" load.tasks_per_s)" 2>/dev/null || echo 500)
        fi
        lg --duration 5 --rate "$open_rate" >"$work/open.json"
        lg --tasks 1000 --task spin:1 --concurrency 128 >"$work/spin.json"
        stop_nodes
        w=load.zookeeper.writes_per_task
        rd=load.zookeeper.reads_per_task
        burst=$(j "$work/burst.json" load.tasks_per_s)
        raw=$(j "$work/raw.json" raw.creates_per_s)
        ratio() {
            python3 -c 'import sys; print(f"{float(sys.argv[1]) / float(sys.argv[2]):.2f}")' \
                "$1" "$raw" 2>/dev/null || echo n/a
        }
        burst100=$(j "$work/burst100.json" load.tasks_per_s)
        printf '%-6s %-28s | %6s ms, %5s / %5s | %8s (%5s), %5s / %5s | %8s (%5s) | %6s, %6s / %6s, %5s / %5s | %s\n' \
            "$r" "$(echo "$b" | tail -c 28)" \
            "$(j "$work/one.json" load.latency_ms.p50)" "$(j "$work/one.json" $w)" "$(j "$work/one.json" $rd)" \
            "$burst" "$(ratio "$burst")" "$(j "$work/burst.json" $w)" "$(j "$work/burst.json" $rd)" \
            "$burst100" "$(ratio "$burst100")" \
            "$open_rate" "$(j "$work/open.json" load.latency_ms.p50)" "$(j "$work/open.json" load.latency_ms.p99)" \
            "$(j "$work/open.json" $w)" "$(j "$work/open.json" $rd)" \
            "$(j "$work/spin.json" load.tasks_per_s)"
    done
done
