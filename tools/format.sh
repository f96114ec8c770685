#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Formats the C++ sources with clang-format (.clang-format), or with --check lists the files
# that differ from it and fails: tools/test.sh runs the check first.
# Usage: tools/format.sh [--check] [FILE...]   (default: every tracked .cpp/.hpp)
set -euo pipefail
cd "$(dirname "$0")/.."

check=0
files=()
for arg in "$@"; do
    case "$arg" in
        --check) check=1 ;;
        -h|--help) sed -n '3,5p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "format.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
        *) files+=("$arg") ;;
    esac
done
command -v clang-format >/dev/null || { echo "format.sh: clang-format is missing (tools/install-deps.sh installs it)" >&2; exit 1; }
if [ "${#files[@]}" = 0 ]; then
    mapfile -t files < <(git ls-files '*.cpp' '*.hpp')
fi
if [ "$check" = 0 ]; then
    clang-format -i "${files[@]}"
    exit 0
fi
# One clang-format per batch of files (a process per file took most of a minute), one batch
# after another (side by side, their diagnostics interleave); each file that differs is named
# in a diagnostic of its own.
status=0
out=$(printf '%s\0' "${files[@]}" |
    xargs -0 -n 100 clang-format --dry-run -Werror --ferror-limit=1 2>&1) || status=$?
mapfile -t bad < <(sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: .*/\1/p' <<<"$out" | sort -u)
if [ "$status" != 0 ] && [ "${#bad[@]}" = 0 ]; then
    echo "format.sh: clang-format failed:" >&2
    tail -20 <<<"$out" >&2
    exit 1
fi
if [ "${#bad[@]}" -gt 0 ]; then
    echo "format.sh: ${#bad[@]} file(s) not formatted as .clang-format says (run tools/format.sh):" >&2
    printf '  %s\n' "${bad[@]}" >&2
    exit 1
fi
echo "format.sh: ${#files[@]} files formatted as .clang-format says"
