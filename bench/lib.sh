# shellcheck shell=bash disable=SC2034
# SPDX-License-Identifier: MIT
# Sourced by the bench scripts, which set `root` (the checkout) first.

# bench_binaries DIR: the zkd, zkd-loadgen and zkd-zk-local of the build in DIR (relative to
# the checkout, or absolute), built there (Release) if zkd is missing; sets zkd, loadgen and
# zklocal.
bench_binaries() {
    local build=$1
    case "$build" in /*) ;; *) build=${root:?}/$build ;; esac
    if [ ! -x "$build/src/zkd" ]; then
        cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF >/dev/null
        cmake --build "$build" -j 2 --target zkd zkd_loadgen zkd_zk_local_cli
    fi
    zkd=$build/src/zkd
    loadgen=$build/tools/loadgen/zkd-loadgen
    zklocal=$build/tools/zk_local/zkd-zk-local
}

# bench_zookeeper NAME: a work directory (zkd-NAME-XXXXXX under TMPDIR) and a fresh fsync
# ZooKeeper in it; sets work and connect, and an empty nodes list (the pids stop_nodes
# stops); on exit (also Ctrl-C) stops the nodes and the server and removes the directory.
# Call bench_binaries first.
bench_zookeeper() {
    work=$(mktemp -d "${TMPDIR:-/tmp}/zkd-$1-XXXXXX")
    nodes=()
    trap bench_on_exit EXIT
    trap 'exit 130' INT TERM
    connect=$("$zklocal" start --dir "$work/zk" --force-sync 2>/dev/null)
    echo "ZooKeeper (fsync) at $connect; load average $(cut -d' ' -f1-3 /proc/loadavg)"
}

# stop_nodes: SIGTERM to every pid in nodes, then waits for them.
stop_nodes() {
    for p in "${nodes[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${nodes[@]}"; do wait "$p" 2>/dev/null || true; done
    nodes=()
}

bench_on_exit() {
    stop_nodes
    "$zklocal" stop --dir "$work/zk" >/dev/null 2>&1 || true
    rm -rf "$work"
}
