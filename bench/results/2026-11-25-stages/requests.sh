#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Each ZooKeeper request of an open loop, split in three (session 17): from zkco issuing it
# to its leaving on the wire, from there to ZooKeeper's answer on the wire, and from the
# answer to the C client's completion callback in the process. Needs a build with
# zkco-times.diff applied (git apply it, build Release, revert): zkco then writes, at exit,
# the wall-clock time of each request it issues and of each completion, to
# $ZKD_EXP_REPLIES/issue-PID.txt and callback-PID.txt. One fsync zkd-zk-local, 4 zkd run
# (defaults), a warm-up, a 5 s loop, then a capture of a 3 s loop at 2,000 tasks/s;
# requests.py lines each process's times up with the capture's requests and answers by xid.
# Usage: requests.sh OUT_DIR   (R=build dir, default build/release; needs tcpdump and ss)
cd "$(dirname "$0")/../../.." || exit 1
R=${R:-build/release}; out=${1:?}; rm -rf "$out"; mkdir -p "$out"
C=$($R/tools/zk_local/zkd-zk-local start --dir "$out/zk" --force-sync 2>/dev/null); port=${C##*:}
echo "$port" >"$out/port"
export ZKD_EXP_REPLIES=$out
pids=()
for i in 1 2 3 4; do
  $R/src/zkd run --zk "$C" --namespace x --host "x-$i" --log-level warn >>"$out/n$i.log" 2>&1 & pids+=($!)
done
LG=("$R/tools/loadgen/zkd-loadgen" --zk "$C" --namespace x --no-progress)
"${LG[@]}" --workers 4 --wait-workers 30000 --tasks 2000 --concurrency 16 >/dev/null 2>&1
"${LG[@]}" --duration 5 --rate 2000 >/dev/null 2>&1
(exec tcpdump -i lo -n -s 0 -w "$out/cap.pcap" "tcp port $port" 2>/dev/null) & tp=$!
sleep 0.5
"${LG[@]}" --duration 3 --rate 2000 >"$out/lg.txt" 2>&1 & lp=$!
sleep 1; ss -tnp | grep ":$port" >"$out/ss.txt"
wait "$lp"; grep latency "$out/lg.txt"
sleep 0.3; kill "$tp"; wait "$tp" 2>/dev/null
kill "${pids[@]}"; wait "${pids[@]}" 2>/dev/null
$R/tools/zk_local/zkd-zk-local stop --dir "$out/zk" >/dev/null 2>&1
tcpdump -r "$out/cap.pcap" -n -tt -x 2>/dev/null >"$out/cap.txt"
python3 bench/results/2026-11-25-stages/requests.py "$out"
