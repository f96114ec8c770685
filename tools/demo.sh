#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The run command: installs what is missing, builds zkd (Release), starts a local ZooKeeper
# by itself, runs the zkco tour against it, starts a cluster of three zkd instances, submits
# a mix of tasks, a job through a script task type (word counts, examples/exec) and a crack
# job, shows their results and the cluster view, then stops everything it started.
# Usage: tools/demo.sh [--no-install]
set -euo pipefail
cd "$(dirname "$0")/.."

install=1
for arg in "$@"; do
    case "$arg" in
        --no-install) install=0 ;;
        -h|--help) sed -n '3,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "demo.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done

[ "$install" = 1 ] && tools/install-deps.sh
echo "== build (build/release)"
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF >/dev/null
cmake --build build/release -j "$(nproc 2>/dev/null || echo 2)"
bin=build/release/tools

zkdir=$(mktemp -d "${TMPDIR:-/tmp}/zkd-demo-XXXXXX")
nodes=()
cleanup() {
    for pid in "${nodes[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${nodes[@]}"; do wait "$pid" 2>/dev/null || true; done
    "$bin/zk_local/zkd-zk-local" stop --dir "$zkdir/zk" >/dev/null 2>&1 || true
    rm -rf "$zkdir"
}
trap cleanup EXIT INT TERM

zkd=build/release/src/zkd

echo "== start a local ZooKeeper"
connect=$("$bin/zk_local/zkd-zk-local" start --dir "$zkdir/zk" 2>/dev/null)
echo "ZooKeeper at $connect (data and logs in $zkdir)"

echo "== zkco tour"
"$bin/zkd-zkco-smoke" --zk "$connect"

echo "== start three zkd instances (logs in $zkdir/node*.log)"
for i in 1 2 3; do
    # Each also serves `wordcount`, a Python script (docs/exec.md).
    "$zkd" run --zk "$connect" --namespace demo --capacity 2 --host "node$i" --grace 5s \
        --exec "wordcount=$PWD/examples/exec/wordcount.py" >"$zkdir/node$i.log" 2>&1 &
    nodes+=($!)
done

# Client commands use a cluster, never make one: wait until the three have joined.
for _ in $(seq 1 300); do
    "$zkd" cluster --zk "$connect" --namespace demo 2>/dev/null | grep -q '^workers   3,' && break
    sleep 0.1
done

echo "== submit tasks and wait for their results"
submit() {
    echo "\$ zkd submit $*"
    "$zkd" submit "$@" --zk "$connect" --namespace demo --wait --timeout 30000 || echo "(exit $?)"
}
submit sum '[1, 2, 3, 4]'
submit echo '{"hello": "zkd"}'
submit sleep '{"ms": 200}'
submit md5-crack '{"hash": "02926b8c2fe8e26a3bc6e810554a2120", "charset": "abcdefghijklmnopqrstuvwxyz", "min_len": 1, "max_len": 3, "start": 0, "count": 18278}'
submit fail '{"message": "this task fails on purpose"}'
submit no-such-type '{}'   # refused: no worker serves it (--allow-unserved submits anyway)

echo "== a task in flight: status, the task list, cancel"
z() { echo "\$ zkd $*"; "$zkd" "$@" --zk "$connect" --namespace demo || echo "(exit $?)"; }
id=$("$zkd" submit sleep '{"ms": 60000}' --zk "$connect" --namespace demo)
sleep 0.5
z status "$id"
z tasks
z cancel "$id" --wait

echo "== a script task type: word counts of this repository's sources, in 6 tasks over 3 nodes"
mapfile -t files < <(find "$PWD/src" "$PWD/docs" -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.md' \) | sort)
ids=()
for part in 0 1 2 3 4 5; do
    chunk=()
    for ((k = part; k < ${#files[@]}; k += 6)); do chunk+=("\"${files[k]}\""); done
    args="{\"files\":[$(IFS=,; echo "${chunk[*]}")],\"pause_ms\":300}"
    ids+=("$("$zkd" submit wordcount "$args" --zk "$connect" --namespace demo)")
done
sleep 1
z tasks   # the progress each program reports, as its worker publishes it
total=0
for id in "${ids[@]}"; do
    out=$("$zkd" wait "$id" --zk "$connect" --namespace demo --timeout 60000)
    words=$(printf '%s' "$out" | grep -o '"total":[0-9]*' | cut -d: -f2)
    worker=$(printf '%s' "$out" | grep -o '"worker":"[^"]*"' | cut -d'"' -f4)
    echo "  $id: $words words (on $worker)"
    total=$((total + words))
done
echo "  ${#files[@]} files, $total words"

echo "== a distributed MD5 crack: which word of up to 5 lowercase letters has this hash?"
hash=$(printf 'quark' | md5sum | cut -d' ' -f1)
z crack "$hash" --charset lower --max-length 5 --timeout 5m
z crack --status "$hash"

echo "== the cluster"
z cluster

echo "== who did what"
grep -h "elected master\|took over\|joined\|rejected" "$zkdir"/node*.log | sed 's/^/  /'

echo "== stop the cluster and ZooKeeper"
cleanup
trap - EXIT INT TERM
echo "== done: nothing left running"
