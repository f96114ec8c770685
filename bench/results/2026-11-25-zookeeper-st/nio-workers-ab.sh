#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# How nio-workers-ab.txt was taken (session 14): one fsync zkd-zk-local, either as it was or
# with EXTRA appended to its zoo.cfg and the server restarted; 4 zkd run, a warm-up (4,000
# tasks at 16 in flight, then 10 s at 2,000/s, not reported), two 8 s open loops at 2,000
# tasks/s, and the CPU ticks (1/100 s) ZooKeeper used in all of it. Run alternately:
#   for k in 1 2 3; do nio-workers-ab.sh none OUT-a; nio-workers-ab.sh nio.numWorkerThreads=0 OUT-b; done
# Usage: nio-workers-ab.sh EXTRA|none OUT_DIR   (R=build dir, default build/release)
set -u
R=${R:-build/release}; extra=${1:?EXTRA or none}; out=${2:?out dir}; rm -rf $out; mkdir -p $out
C=$($R/tools/zk_local/zkd-zk-local start --dir $out/zk --force-sync 2>/dev/null)
if [ "$extra" != none ]; then
  echo "$extra" >> $out/zk/server1/zoo.cfg
  $R/tools/zk_local/zkd-zk-local stop-member --dir $out/zk 1 >/dev/null 2>&1
  $R/tools/zk_local/zkd-zk-local start-member --dir $out/zk 1 >/dev/null 2>&1
fi
pids=()
for i in 1 2 3 4; do $R/src/zkd run --zk "$C" --namespace x --host x-$i --log-level warn >>$out/n$i.log 2>&1 & pids+=($!); done
LG=($R/tools/loadgen/zkd-loadgen --zk "$C" --namespace x --no-progress)
"${LG[@]}" --workers 4 --wait-workers 30000 --tasks 4000 --concurrency 16 >/dev/null
"${LG[@]}" --duration 10 --rate 2000 >/dev/null
for rate in 2000 2000; do "${LG[@]}" --duration 8 --rate $rate | grep -E 'latency' ; done
ZP=$(pgrep -f "$out/zk/server1/zoo.cfg" | head -1); awk '{print "zk cpu ticks", $14+$15}' /proc/$ZP/stat
kill "${pids[@]}"; wait "${pids[@]}" 2>/dev/null
$R/tools/zk_local/zkd-zk-local stop --dir $out/zk >/dev/null 2>&1
