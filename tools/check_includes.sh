#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Checks the doors between the rooms of src/: each folder includes only the folders below it
# (CONTRIBUTING.md "Where things are"), and a detail/ folder only from its own room. Prints
# each include across a forbidden edge and exits 1 if there is one. tools/test.sh runs it.
# Usage: tools/check_includes.sh
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
    -h|--help) sed -n '3,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    "") ;;
    *) echo "check_includes.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac

# FOLDER: the prefixes its files may include (besides the C++ and system headers). A more
# specific folder comes first; the first that matches a file decides.
rules=(
    "src/zkco/: zkco/"
    "src/reactor/: reactor/"
    "src/protocol/: protocol/"
    "src/handlers/: handlers/ protocol/"
    # Workflows' pure parts (spec, ids, documents, workflow_fsm): the wire format only.
    "src/workflow/: workflow/ protocol/"
    # Schedules' pure parts (spec, cron, due times and firing decisions): the wire format only.
    "src/schedule/: schedule/ protocol/"
    "src/roles/txn/: roles/txn/ protocol/ zkco/"
    "src/roles/cluster/: roles/cluster/ protocol/ zkco/ reactor/"
    "src/roles/worker/: roles/worker/ roles/cluster/ roles/txn/ handlers/ protocol/ zkco/ reactor/"
    "src/roles/client/: roles/client/ roles/cluster/ roles/txn/ protocol/ zkco/ reactor/"
    # T8 leaves the workflows' result directories alone (workflow/ids.hpp).
    "src/roles/master/: roles/master/ roles/cluster/ roles/txn/ workflow/ids.hpp protocol/ zkco/ reactor/"
    # The workflow engine, beside the master: workflow_fsm's shell.
    "src/roles/workflow/: roles/workflow/ roles/txn/ workflow/ protocol/ zkco/ reactor/"
    # The schedule engine, beside the master, and the schedule client.
    "src/roles/schedule/: roles/schedule/ roles/txn/ schedule/ protocol/ zkco/ reactor/"
    "src/roles/: roles/ handlers/ workflow/ schedule/ protocol/ zkco/ reactor/"
    "src/http/: http/ roles/client/ roles/cluster/ roles/stats.hpp roles/workflow/client.hpp workflow/ roles/schedule/client.hpp schedule/ handlers/registry.hpp protocol/ zkco/ reactor/"
    # Applications use the client API (crack's job and its tasks in one transaction too:
    # roles::task_transaction).
    "src/apps/: apps/ roles/client/task_client.hpp handlers/registry.hpp protocol/ zkco/ reactor/"
)

allowed_for() {
    local file=$1 rule
    for rule in "${rules[@]}"; do
        if [[ "$file" == "${rule%%:*}"* ]]; then
            echo "${rule#*: }"
            return
        fi
    done
    echo "*"  # cli/, main.cpp: the program may include anything
}

bad=0
while IFS= read -r file; do
    allowed=$(allowed_for "$file")
    while IFS= read -r inc; do
        [ -n "$inc" ] || continue
        ok=0
        if [ "$allowed" = "*" ]; then
            ok=1
        else
            for prefix in $allowed; do
                [[ "$inc" == "$prefix"* ]] && ok=1 && break
            done
        fi
        # A detail/ folder is private to the room that holds it.
        if [[ "$inc" == */detail/* ]]; then
            room=${inc%%/detail/*}
            [[ "$file" == "src/$room/"* ]] || ok=0
        fi
        if [ "$ok" = 0 ]; then
            echo "check_includes: $file includes \"$inc\" across a forbidden edge" >&2
            bad=1
        fi
    done < <(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$file")
done < <(git ls-files 'src/*.cpp' 'src/*.hpp')

if [ "$bad" = 1 ]; then
    echo "check_includes: the doors are in CONTRIBUTING.md (\"Where things are\") and here" >&2
    exit 1
fi
