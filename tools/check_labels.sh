#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fails on numbered internal milestone labels in the tracked files: the word session, issue,
# milestone or stop followed by a number ("session N", "Issue N.M:", "(issue #N)",
# "milestone N"), "item N" (of an issue), "round N of the review" and "(#N)". Comments, docs,
# test names and results say what is true of the product now; history goes into
# CHANGELOG.md, by version. Legitimate text passes: "session timeout", "zk session
# 0x1f...", "(session 4 s)", "session 4.000s" (a number with a unit), "round 1" of a run.
# Usage: tools/check_labels.sh [--help]
# Exit codes: 0 no label found, 1 labels found (listed as FILE:LINE: TEXT), 2 usage error.
set -euo pipefail
cd "$(dirname "$0")/.."

for arg in "$@"; do
    case "$arg" in
        -h|--help) sed -n '3,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "check_labels.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done

# A number (11, 11.6; taken whole) not glued to a letter (0x1f, 4.000s, 10ms) nor followed
# by a unit (4 s, 10 ms, 2 minutes).
num='#?(?>\d+(?:\.\d+)?)(?!\w)(?!\s*(?:s|ms|sec|secs|seconds?|min|minutes?|h|hours?)\b)'
pattern="\\b(?:session|issue|milestone|stop)[-_ ]?${num}"
pattern+="|\\bitem \\d+\\b"
pattern+="|\\bround \\d+ of (?:the )?review"
pattern+="|\\(#\\d+\\)"

# -I skips binary files; this script names the words it looks for, so it is left out.
if hits=$(git grep -n -I -i -P "$pattern" -- . ':(exclude)tools/check_labels.sh'); then
    echo "check_labels.sh: numbered internal milestone labels (write what is true now;" \
         "history goes into CHANGELOG.md):" >&2
    printf '%s\n' "$hits" >&2
    exit 1
fi
