#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the Debian package of zkd (CPack DEB, cmake/zkd_package.cmake): zkd, zkd-loadgen,
# zkd-zk-local, zkd-chaos with their man pages, the systemd unit zkd.service, the commented
# config /etc/zkd/zkd.conf and the zkd system user; runtime dependencies from dpkg-shlibdeps.
# Usage: tools/package.sh [--build-dir DIR] [--no-build] [--out DIR]
#   --build-dir DIR  the build to package (default build/release, configured Release without
#                    tests if it does not exist yet); never a sanitizer build
#   --no-build       package DIR as it is (else its programs and man pages are brought up
#                    to date first)
#   --out DIR        where the .deb goes (default: DIR/packages)
# Prints the .deb's path as its last line.
set -euo pipefail
cd "$(dirname "$0")/.."

build=build/release
out=
do_build=1
while [ $# -gt 0 ]; do
    case "$1" in
        --build-dir) build=${2:?--build-dir needs a directory}; shift ;;
        --out) out=${2:?--out needs a directory}; shift ;;
        --no-build) do_build=0 ;;
        -h|--help) sed -n '3,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "package.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[ -n "$out" ] || out=$build/packages

for tool in cpack dpkg-shlibdeps dpkg-deb help2man; do
    command -v "$tool" >/dev/null || {
        echo "package.sh: '$tool' is missing (tools/install-deps.sh installs it)" >&2; exit 1; }
done

if [ "$do_build" = 1 ]; then
    # Configured again even when it exists: it finds help2man if it came since.
    echo "== configure $build" >&2
    if [ -f "$build/CMakeCache.txt" ]; then
        cmake -S . -B "$build" >/dev/null
    else
        cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF >/dev/null
    fi
elif [ ! -f "$build/CMakeCache.txt" ]; then
    echo "package.sh: no build in '$build'" >&2
    exit 1
fi
if grep -q '^ZKD_SANITIZE:STRING=.' "$build/CMakeCache.txt"; then
    echo "package.sh: '$build' is a sanitizer build: package a plain one" >&2
    exit 1
fi
if [ "$do_build" = 1 ]; then
    echo "== build $build" >&2
    cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" \
        --target zkd zkd_loadgen zkd_zk_local_cli zkd_chaos zkd_man >&2
fi
[ -f "$build/man/zkd.1.gz" ] || {
    echo "package.sh: '$build' has no man pages (configured before help2man was installed?" \
         "re-run cmake -S . -B $build)" >&2; exit 1; }

mkdir -p "$out"
out=$(cd "$out" && pwd)
echo "== package into $out" >&2
log=$out/cpack.log
if ! cpack --config "$build/CPackConfig.cmake" -B "$out" >"$log" 2>&1; then
    cat "$log" >&2
    echo "package.sh: cpack failed" >&2
    exit 1
fi
rm -rf "$out/_CPack_Packages"
deb=$(sed -n 's/^CPack: - package: \(.*\.deb\) generated\.$/\1/p' "$log" | tail -1)
if [ -z "$deb" ] || [ ! -f "$deb" ]; then
    cat "$log" >&2
    echo "package.sh: no .deb came out" >&2
    exit 1
fi
echo "$deb"
