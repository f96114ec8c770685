#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Where the slow tasks of an open loop fall in time (session 16): one fsync zkd-zk-local
# (JTO: JAVA_TOOL_OPTIONS for its JVM, e.g. "-Xmn512m -XX:+AlwaysPreTouch" or
# "-Xlog:gc*:file=gc.log:time,uptime"), 4 zkd run, a warm-up, then DUR seconds (default 10)
# at RATE tasks/s (default 2000) with zkd-loadgen --trace; prints the latency line, the tasks
# over 10 ms, and the 100 ms bins that hold most of them (trace-bins.py for the details).
# Usage: trace.sh OUT_DIR   (R=build dir, default build/release)
cd "$(dirname "$0")/../../.." || exit 1
R=${R:-build/release}; out=${1:?}; rate=${RATE:-2000}; rm -rf "$out"; mkdir -p "$out"
C=$(JAVA_TOOL_OPTIONS="${JTO:-}" $R/tools/zk_local/zkd-zk-local start --dir "$out/zk" --force-sync 2>/dev/null)
pids=()
for i in 1 2 3 4; do
  $R/src/zkd run --zk "$C" --namespace x --host "x-$i" --log-level warn >>"$out/n$i.log" 2>&1 & pids+=($!)
done
LG=($R/tools/loadgen/zkd-loadgen --zk "$C" --namespace x --no-progress)
"${LG[@]}" --workers 4 --wait-workers 30000 --tasks 4000 --concurrency 16 >/dev/null
"${LG[@]}" --duration 10 --rate "$rate" >/dev/null
"${LG[@]}" --duration "${DUR:-10}" --rate "$rate" --trace "$out/trace.txt" >"$out/loadgen.txt"
kill "${pids[@]}"; wait "${pids[@]}" 2>/dev/null
$R/tools/zk_local/zkd-zk-local stop --dir "$out/zk" >/dev/null 2>&1
grep -E "latency|stages" "$out/loadgen.txt"
python3 - "$out/trace.txt" <<'PY'
import sys
rows=[l.split() for l in open(sys.argv[1]) if l[0].isdigit()]
rows=[(float(r[0]), float(r[1])) for r in rows]
slow=[r for r in rows if r[1]>10]
print(len(rows), "tasks;", len(slow), "over 10 ms")
# by 100 ms bins
import collections
b=collections.Counter(int(d//100) for d,l in slow)
print("bins (100 ms) with slow tasks:", len(b), "top:", b.most_common(12))
PY
