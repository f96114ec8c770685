#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Direct placement (session 18), open loops at RATE tasks/s (default 2000) on the defaults
# cluster: one fsync zkd-zk-local, 4 zkd run (no options), Release. Per configuration: a
# warm-up (2,000 tasks, 16 in flight), a 5 s loop, then three DUR s loops (default 8) with
# their latency, ZooKeeper's requests per task (mntr), the loadgen's own session and
# ZooKeeper's CPU ticks over the loop. Configurations, alternated ROUNDS times (default 2):
#   base    the build at BASE (before direct placement)
#   direct  the build at R (default build/release)
#   pending the build at R, zkd-loadgen --no-direct (every task through the master)
# Usage: loops.sh OUT_DIR   (BASE=build dir of the baseline, required)
cd "$(dirname "$0")/../../.." || exit 1
out=${1:?OUT_DIR}; rate=${RATE:-2000}; R=${R:-build/release}; B=${BASE:?BASE=baseline build dir}
mkdir -p "$out"
ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
one() {  # one configuration: build dir, name, extra loadgen args...
  local b=$1 name=$2; shift 2
  local d="$out/$name.$round"
  rm -rf "$d"; mkdir -p "$d"
  local C; C=$("$b/tools/zk_local/zkd-zk-local" start --dir "$d/zk" --force-sync 2>/dev/null)
  local pids=() i
  for i in 1 2 3 4; do
    "$b/src/zkd" run --zk "$C" --namespace x --host "x-$i" --log-level warn >>"$d/n$i.log" 2>&1 &
    pids+=($!)
  done
  local LG=("$b/tools/loadgen/zkd-loadgen" --zk "$C" --namespace x --no-progress)
  "${LG[@]}" --workers 4 --wait-workers 30000 --tasks 2000 --concurrency 16 >/dev/null 2>&1
  local zk; zk=$(pgrep -f "zookeeper.*$d" | head -1)
  "${LG[@]}" --duration 5 --rate "$rate" "$@" >/dev/null 2>&1
  echo "== $name round $round"
  for k in 1 2 3; do
    local z0; z0=$(ticks "$zk")
    "${LG[@]}" --duration "${DUR:-8}" --rate "$rate" "$@" >"$d/lg$k.txt" 2>&1
    echo "$(grep -E "latency" "$d/lg$k.txt")  zk-cpu-ticks $(( $(ticks "$zk") - z0 ))"
    grep -E "ZooKeeper \(mntr|this client" "$d/lg$k.txt"
  done
  kill "${pids[@]}"; wait "${pids[@]}" 2>/dev/null
  "$b/tools/zk_local/zkd-zk-local" stop --dir "$d/zk" >/dev/null 2>&1
}
for round in $(seq "${ROUNDS:-2}"); do
  one "$B" base
  one "$R" direct
  one "$R" pending --no-direct
done
