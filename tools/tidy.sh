#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs clang-tidy (.clang-tidy) on the .cpp files a change touches, with build/test's compile
# database; fails on any finding. A whole-tree run costs 10-40 s of CPU per file (about an
# hour on 2 cores), too much for every CI run: run this before each commit.
# Usage: tools/tidy.sh [--build DIR] [--since REV | FILE...]
#   --since REV  the .cpp files changed since REV, committed or not (default: HEAD, i.e. the
#                uncommitted change)
set -euo pipefail
cd "$(dirname "$0")/.."

build=build/test
since=HEAD
files=()
while [ $# -gt 0 ]; do
    case "$1" in
        --build) shift; build=${1:?--build needs a directory} ;;
        --since) shift; since=${1:?--since needs a revision} ;;
        -h|--help) sed -n '3,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "tidy.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
        *) files+=("$1") ;;
    esac
    shift
done
[ -r "$build/compile_commands.json" ] || { echo "tidy.sh: no $build/compile_commands.json (build it first)" >&2; exit 1; }
if [ "${#files[@]}" = 0 ]; then
    mapfile -t files < <( { git diff --name-only "$since" -- '*.cpp'; git ls-files --others --exclude-standard -- '*.cpp'; } \
        | sort -u | while read -r f; do [ -f "$f" ] && echo "$f"; done)
fi
[ "${#files[@]}" = 0 ] && { echo "tidy.sh: no .cpp file changed since $since"; exit 0; }
echo "tidy.sh: ${#files[@]} file(s)"
# Findings are the lines with a place (clang 14 also prints a placeless naming warning about
# a compiler-made template parameter, 'expr-type', on every file: not ours).
log=$(mktemp)
trap 'rm -f "$log"' EXIT
run-clang-tidy -p "$build" -j "$(nproc 2>/dev/null || echo 2)" -quiet "${files[@]/#/$PWD/}" 2>&1 \
    | sed 's/\x1b\[[0-9;]*m//g' >"$log" || true
if grep -E '^[^ ]+:[0-9]+:[0-9]+: (warning|error):' "$log"; then
    echo "tidy.sh: findings above" >&2
    exit 1
fi
echo "tidy.sh: clean"
