#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A/B of a burst through the HTTP API (not a test): per build and round, a fresh namespace on
# one fsync ZooKeeper, one `zkd run --http` and one more `zkd run` (default options
# otherwise), and N POST /v1/tasks?wait of one `echo` task each from C connections at once
# (bench/http_burst.py: Python threads, which cap what one client machine can send); tasks/s,
# latency p50/p99, and ZooKeeper's write transactions and packets received per task, from the
# server's counters. Rounds alternate the builds, so each figure has a baseline from the same
# run (the machine is noisy: compare within a round).
# Usage: bench/http.sh [--rounds N] [--tasks N] [--connections C] BUILD_DIR...
#   BUILD_DIR        a build with src/zkd and tools/zk_local/zkd-zk-local
#   --rounds N       rounds (default 2)
#   --tasks N        tasks a round (default 4000)
#   --connections C  connections at once (default 64)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
# shellcheck source=bench/lib.sh
. bench/lib.sh

rounds=2
tasks=4000
connections=64
builds=()
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) shift; rounds=${1:?--rounds needs a number} ;;
        --tasks) shift; tasks=${1:?--tasks needs a number} ;;
        --connections) shift; connections=${1:?--connections needs a number} ;;
        -h|--help) awk 'NR > 2 && /^#/ { sub(/^# ?/, ""); print; next } NR > 2 { exit }' "$0"; exit 0 ;;
        -*) echo "bench/http.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
        *) builds+=("$1") ;;
    esac
    shift
done
for n in "$rounds" "$tasks" "$connections"; do
    case "$n" in ''|*[!0-9]*|0) echo "bench/http.sh: '$n' is no positive whole number" >&2; exit 2 ;; esac
done
[ "${#builds[@]}" -ge 1 ] || { echo "bench/http.sh: name at least one build directory (see --help)" >&2; exit 2; }

bench_binaries "${builds[0]}"
bench_zookeeper http

# The server's write transactions so far (its last zxid's counter) and packets received.
zk_counts() {
    python3 - "$connect" <<'PY'
import socket, sys
host, port = sys.argv[1].split(",")[0].rsplit(":", 1)
def ask(word):
    s = socket.create_connection((host, int(port)), timeout=5)
    s.sendall(word.encode())
    out = b""
    while chunk := s.recv(65536):
        out += chunk
    return out.decode()
zxid = next(l for l in ask("srvr").splitlines() if l.startswith("Zxid:")).split()[1]
packets = next(l for l in ask("mntr").splitlines() if l.startswith("zk_packets_received"))
print(int(zxid, 16) & 0xFFFFFFFF, packets.split()[1])
PY
}

printf '%-6s %-28s | %8s | %8s %8s | %10s %10s | %s\n' round build tasks/s "p50 ms" "p99 ms" \
    "writes/t" "packets/t" "not 200"
for r in $(seq 1 "$rounds"); do
    for k in "${!builds[@]}"; do
        b=${builds[$k]}
        bench_binaries "$b"
        ns=http$r-$k
        port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
        "$zkd" run --zk "$connect" --namespace "$ns" --host "$ns-1" --log-level warn \
            --http "127.0.0.1:$port" >>"$work/$ns-1.log" 2>&1 &
        nodes+=($!)
        "$zkd" run --zk "$connect" --namespace "$ns" --host "$ns-2" --log-level warn \
            >>"$work/$ns-2.log" 2>&1 &
        nodes+=($!)
        for _ in $(seq 1 300); do
            members=$(curl -fs "http://127.0.0.1:$port/v1/cluster" 2>/dev/null | grep -o '"capacity"' | wc -l) || members=0
            [ "$members" -ge 2 ] && break
            sleep 0.1
        done
        if [ "$members" -lt 2 ]; then
            echo "bench/http.sh: $b: the two nodes did not both join within 30 s; their logs:" >&2
            tail -n 20 "$work/$ns-1.log" "$work/$ns-2.log" >&2
            exit 1
        fi
        counts=$(zk_counts) || { echo "bench/http.sh: cannot read ZooKeeper's counters" >&2; exit 1; }
        read -r w0 p0 <<<"$counts"
        python3 bench/http_burst.py "127.0.0.1:$port" "$tasks" "$connections" >"$work/out.json"
        counts=$(zk_counts) || { echo "bench/http.sh: cannot read ZooKeeper's counters" >&2; exit 1; }
        read -r w1 p1 <<<"$counts"
        stop_nodes
        python3 - "$work/out.json" "$r" "$(echo "$b" | tail -c 28)" "$tasks" "$w0" "$w1" "$p0" "$p1" <<'PY'
import json, sys
o = json.load(open(sys.argv[1]))
r, b, n = sys.argv[2], sys.argv[3], int(sys.argv[4])
w0, w1, p0, p1 = map(int, sys.argv[5:9])
print(f"{r:<6} {b:<28} | {o['tasks_per_s']:>8} | {o['p50_ms']:>8} {o['p99_ms']:>8} | "
      f"{(w1 - w0) / n:>10.2f} {(p1 - p0) / n:>10.2f} | {o['errors']} {' '.join(o['first_errors'])}")
PY
    done
done
