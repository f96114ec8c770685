#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Where a task's time goes, stage by stage, as the wire shows it (session 17): one fsync
# zkd-zk-local, 4 zkd run (defaults), a warm-up (WARM tasks, default 2000, 16 in flight), then
#   open   a 5 s open loop at RATE tasks/s (default 2000), then a packet capture of every
#          request, answer and watch notification on ZooKeeper's port during a 3 s one,
#          which stages.py follows task by task;
#   one    the same capture around 500 tasks one at a time;
#   loops  no capture: a 5 s loop, then three DUR s ones (default 8), a latency line each
#          (session 17's A/B runs);
#   requests  as open, on a build with zkco-times.diff applied (zkco then writes the time
#          of each request it issues and each completion to OUT_DIR at exit): requests.py
#          splits each request in three (issue -> wire -> answer -> completion).
# Switches of session 17's experiments, set after the warm-up: SLICE=ns (slice.c, built at
# S, default /tmp/slice/slice, on zkd run and on each measured loadgen), ZKSLICE=ns (on
# ZooKeeper's JVM), NICE=n (renice every ZooKeeper thread). Other variables in the
# environment reach zkd run (an experiment build's switches).
# Usage: capture.sh open|one|loops|requests OUT_DIR   (R=build dir, default build/release;
#        needs tcpdump, and ss for requests)
cd "$(dirname "$0")/../../.." || exit 1
R=${R:-build/release}; S=${S:-/tmp/slice/slice}
mode=${1:?open, one, loops or requests}; out=${2:?}; rate=${RATE:-2000}
rm -rf "$out"; mkdir -p "$out"
C=$($R/tools/zk_local/zkd-zk-local start --dir "$out/zk" --force-sync 2>/dev/null)
port=${C##*:}
echo "$port" >"$out/port"
[ "$mode" = requests ] && export ZKD_EXP_REPLIES=$out
pids=()
for i in 1 2 3 4; do
  $R/src/zkd run --zk "$C" --namespace x --host "x-$i" --log-level warn >>"$out/n$i.log" 2>&1 & pids+=($!)
done
LG=("$R/tools/loadgen/zkd-loadgen" --zk "$C" --namespace x --no-progress)
"${LG[@]}" --workers 4 --wait-workers 30000 --tasks "${WARM:-2000}" --concurrency 16 >/dev/null 2>&1
zk=$(pgrep -f "zookeeper.*$out" | head -1)
[ -n "$SLICE" ] && "$S" "$SLICE" "${pids[@]}"
[ -n "$ZKSLICE" ] && "$S" "$ZKSLICE" "$zk"
[ -n "$NICE" ] && for t in /proc/"$zk"/task/*; do renice -n "$NICE" -p "${t##*/}" >/dev/null; done
# One measured loadgen run in the background (its slice set as it starts): latency line.
measured() {
  "${LG[@]}" "$@" >"$out/loadgen.txt" 2>&1 & lp=$!
  sleep 0.05; [ -n "$SLICE" ] && "$S" "$SLICE" "$lp"
  wait "$lp"; grep -E "latency|ZooKeeper \(mntr|submit\(\)" "$out/loadgen.txt"
}
filter="tcp port $port and tcp[tcpflags] & tcp-push != 0"
[ "$mode" = requests ] && filter="tcp port $port"  # every segment: no answer missed
cap() { exec tcpdump -i lo -n -s 0 -w "$out/cap.pcap" "$filter" 2>/dev/null; }
case "$mode" in
one)
  cap & tp=$!; sleep 1
  measured --tasks 500 --concurrency 1 ;;
open|requests)
  "${LG[@]}" --duration 5 --rate "$rate" >/dev/null 2>&1
  cap & tp=$!; sleep 0.5
  [ "$mode" = requests ] && (sleep 1; ss -tnp | grep ":$port" >"$out/ss.txt") &
  measured --duration 3 --rate "$rate" ;;
*)
  "${LG[@]}" --duration 5 --rate "$rate" >/dev/null 2>&1
  for _ in 1 2 3; do measured --duration "${DUR:-8}" --rate "$rate"; done ;;
esac
[ -n "$tp" ] && { sleep 0.5; kill "$tp"; wait "$tp" 2>/dev/null; }
kill "${pids[@]}"; wait "${pids[@]}" 2>/dev/null
$R/tools/zk_local/zkd-zk-local stop --dir "$out/zk" >/dev/null 2>&1
here=bench/results/2026-11-25-stages
if [ "$mode" = requests ]; then
  tcpdump -r "$out/cap.pcap" -n -tt -x 2>/dev/null >"$out/cap.txt"
  python3 "$here/requests.py" "$out"
elif [ -n "$tp" ]; then
  tcpdump -r "$out/cap.pcap" -n -tt -x 2>/dev/null | python3 "$here/stages.py" "$port"
fi
