#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs clang-tidy (.clang-tidy) on the .cpp files a change touches; fails on any finding, and
# on a file the compile database does not list. The database is that of a configured (not
# built) default build in build/tidy: one source a compile (a unity build's database lists
# only its unity files, where clang-tidy would check nothing). A whole-tree run costs 10-40 s
# of CPU per file (about an hour on 2 cores), too much for every CI run: run this before each
# commit.
# Usage: tools/tidy.sh [--build DIR] [--since REV | FILE...]
#   --build DIR  read DIR's compile database instead (configured already, not a unity build)
#   --since REV  the .cpp files changed since REV, committed or not (default: HEAD, i.e. the
#                uncommitted change)
set -euo pipefail
cd "$(dirname "$0")/.."

build=
since=HEAD
files=()
while [ $# -gt 0 ]; do
    case "$1" in
        --build) shift; build=${1:?--build needs a directory} ;;
        --since) shift; since=${1:?--since needs a revision} ;;
        -h|--help) sed -n '3,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "tidy.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
        *) files+=("$1") ;;
    esac
    shift
done
if [ -z "$build" ]; then
    build=build/tidy
    cmake -S . -B "$build" -G Ninja -DCMAKE_UNITY_BUILD=OFF -DZKD_TEST_PCH=OFF -DZKD_INTEGRATION_TESTS=ON >/dev/null
fi
[ -r "$build/compile_commands.json" ] || { echo "tidy.sh: no $build/compile_commands.json (configure it first)" >&2; exit 1; }
if [ "${#files[@]}" = 0 ]; then
    mapfile -t files < <( { git diff --name-only "$since" -- '*.cpp'; git ls-files --others --exclude-standard -- '*.cpp'; } \
        | sort -u | while read -r f; do [ -f "$f" ] && echo "$f"; done)
fi
[ "${#files[@]}" = 0 ] && { echo "tidy.sh: no .cpp file changed since $since"; exit 0; }
for i in "${!files[@]}"; do
    files[i]=$(realpath --relative-to=. "${files[i]}")
done
missing=()
for f in "${files[@]}"; do
    grep -qF "\"file\": \"$PWD/$f\"" "$build/compile_commands.json" || missing+=("$f")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "tidy.sh: not in $build/compile_commands.json, so not checked:" "${missing[@]}" >&2
    exit 1
fi
echo "tidy.sh: ${#files[@]} file(s)"
# Findings are the lines with a place in this tree (clang 14 also prints a placeless naming
# warning about a compiler-made template parameter, 'expr-type', on every file, and its static
# analyser ends paths through Asio's coroutine frames in /usr/include/boost/asio/impl/
# awaitable.hpp, 'Called C++ object pointer is uninitialized', on any file with a coroutine).
log=$(mktemp)
trap 'rm -f "$log"' EXIT
run-clang-tidy -p "$build" -j "$(nproc 2>/dev/null || echo 2)" -quiet "${files[@]/#/$PWD/}" 2>&1 \
    | sed 's/\x1b\[[0-9;]*m//g' >"$log" || true
if grep -E "^$PWD/[^ ]+:[0-9]+:[0-9]+: (warning|error):" "$log"; then
    echo "tidy.sh: findings above" >&2
    exit 1
fi
echo "tidy.sh: clean"
