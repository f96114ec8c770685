# shellcheck shell=bash disable=SC2034
# SPDX-License-Identifier: MIT
# Sourced by bench scripts (backlog.sh, requests.sh), which set `root` (the checkout).

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
