#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The run command: installs what is missing, builds zkd (Release), starts a local ZooKeeper
# by itself, runs the zkco tour against it, and stops everything it started.
# Usage: tools/demo.sh [--no-install]
set -euo pipefail
cd "$(dirname "$0")/.."

install=1
for arg in "$@"; do
    case "$arg" in
        --no-install) install=0 ;;
        -h|--help) sed -n '3,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "demo.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done

[ "$install" = 1 ] && tools/install-deps.sh
echo "== build (build/release)"
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF >/dev/null
cmake --build build/release -j "$(nproc 2>/dev/null || echo 2)"
bin=build/release/tools

zkdir=$(mktemp -d "${TMPDIR:-/tmp}/zkd-demo-XXXXXX")
cleanup() {
    "$bin/zkd-zk-local" stop --dir "$zkdir" >/dev/null 2>&1 || true
    rm -rf "$zkdir"
}
trap cleanup EXIT INT TERM

echo "== start a local ZooKeeper"
connect=$("$bin/zkd-zk-local" start --dir "$zkdir" 2>/dev/null)
echo "ZooKeeper at $connect (data in $zkdir)"

echo "== zkco tour"
"$bin/zkd-zkco-smoke" --zk "$connect"

echo "== stop ZooKeeper"
"$bin/zkd-zk-local" stop --dir "$zkdir"
trap - EXIT INT TERM
rm -rf "$zkdir"
echo "== done: nothing left running"
