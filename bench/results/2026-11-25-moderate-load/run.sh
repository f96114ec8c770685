#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# How this directory's figures were taken (session 13, Release build of 20e33fc): the
# defaults configuration (4 `zkd run`, no options) on a fsync zkd-zk-local, a warm-up of
# 2,000 tasks, then three open loops at 1,000 tasks/s for 10 s, each with --trace, the
# ZooKeeper JVM's GC log on, and the CPU ticks of ZooKeeper and the 4 zkd processes before
# and after (utime+stime, 1/100 s). analyze.py groups the slow results and matches GC pauses.
# Usage: run.sh BUILD_DIR OUT_DIR
set -euo pipefail
R=${1:?build dir}; out=${2:?out dir}; mkdir -p "$out"
C=$("$R/tools/zk_local/zkd-zk-local" start --dir "$out/zk" --force-sync 2>/dev/null)
ZP=$(pgrep -f "$out/zk/server1/zoo.cfg" | head -1)
pids=()
for i in 1 2 3 4; do
    "$R/src/zkd" run --zk "$C" --namespace st --host "st-$i" --log-level warn >>"$out/n$i.log" 2>&1 &
    pids+=($!)
done
LG=("$R/tools/loadgen/zkd-loadgen" --zk "$C" --namespace st --no-progress)
"${LG[@]}" --workers 4 --wait-workers 30000 --tasks 2000 --concurrency 16 >/dev/null
ticks() { for p in "$ZP" "${pids[@]}"; do awk '{printf "%d ", $14+$15}' "/proc/$p/stat"; done; }
for k in 1 2 3; do
    jcmd "$ZP" VM.log output="$out/zk-gc$k.log" what=gc decorators=utctime >/dev/null
    before=$(ticks)
    "${LG[@]}" --duration 10 --rate 1000 --trace "$out/trace$k.txt" >"$out/run$k.txt"
    echo "cpu ticks zk,n1..n4: $before -> $(ticks)" >>"$out/run$k.txt"
    jcmd "$ZP" VM.log disable >/dev/null
    "$(dirname "$0")/analyze.py" "$out/trace$k.txt" "$out/zk-gc$k.log" >>"$out/run$k.txt"
done
kill "${pids[@]}"; wait "${pids[@]}" 2>/dev/null || true
"$R/tools/zk_local/zkd-zk-local" stop --dir "$out/zk" >/dev/null
