#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The test command: installs what is missing, builds, and runs every test against a
# ZooKeeper the tests start themselves. Three builds, and the fuzz targets:
#   build/test   RelWithDebInfo, warnings as errors: the unit tests, and the tests that run
#                the programs from outside (Python module, chaos rounds, install, package)
#   build/asan   ASan+UBSan: every test, the integration tests among them
#   build/tsan   TSan: the tests labelled `threads` (zkco, reactor, roles: where callbacks
#                cross threads), building only what they need
#   build/fuzz   clang, libFuzzer: each fuzz target for 4 s from its corpus (tools/fuzz.sh)
# The ASan build compiles while build/test's tests run, and the TSan build while the fuzz
# targets run, at the lowest CPU priority (SCHED_IDLE: only on the CPU time left idle), their
# output shown once they are done.
# Usage: tools/test.sh [--quick] [--no-install]
#   --quick       only build/test, with every test (a fast local loop; CI runs the rest)
#   --no-install  skip tools/install-deps.sh
# A missing Java or ZooKeeper fails the run (here and in CI), it never skips tests.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
install=1
for arg in "$@"; do
    case "$arg" in
        --quick) quick=1 ;;
        --no-install) install=0 ;;
        -h|--help) sed -n '3,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "test.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done

[ "$install" = 1 ] && tools/install-deps.sh
# This command installs ZooKeeper itself: a server the tests cannot start is a failure here,
# never a reason to skip (CI or not). Check the parts first, for a clear message.
export ZKD_REQUIRE_ZK=1
if [ -z "${ZKD_TEST_ZK:-}" ]; then
    java_bin=$(command -v java || true)
    [ -n "$java_bin" ] || java_bin=/usr/bin/java
    if [ ! -x "$java_bin" ] || [ ! -r /usr/share/java/zookeeper.jar ]; then
        echo "test.sh: ZooKeeper cannot run here (java: '$java_bin', jar: /usr/share/java/zookeeper.jar);" \
             "reinstall with: apt-get install --reinstall libzookeeper-java default-jre-headless" >&2
        exit 1
    fi
fi
jobs=$(nproc 2>/dev/null || echo 2)
# The sources as .clang-format says (seconds; clang-tidy runs per change: tools/tidy.sh).
tools/format.sh --check
# No numbered internal milestone labels in tracked files (milliseconds).
tools/check_labels.sh
# The doors between the rooms of src/ (no include across a forbidden edge).
tools/check_includes.sh

# build DIR TARGET [cmake args...]   (TARGET "all" for everything)
build() {
    local dir=$1 target=$2 t0=$SECONDS
    shift 2
    echo "== configure and build $dir ($target)"
    cmake -S . -B "$dir" -G Ninja -DZKD_WERROR=ON "$@" >/dev/null || return
    cmake --build "$dir" -j "$jobs" --target "$target" || return
    echo "== built $dir in $((SECONDS - t0)) s"
}

# check DIR [ctest args...]
check() {
    local dir=$1 t0=$SECONDS
    shift
    echo "== test $dir"
    ctest --test-dir "$dir" -j "$jobs" --output-on-failure --no-tests=error "$@" || return
    echo "== tested $dir in $((SECONDS - t0)) s"
}

# in_background LOG COMMAND...: COMMAND (a program, or the function build) at the lowest CPU
# priority, in a process group of its own (killed if this script ends first), output to LOG.
# finish_background: waits for it, then shows LOG; fails if it failed.
background_pid=
background_log=
in_background() {
    background_log=$1
    shift
    export -f build && export jobs  # for the inner shell only
    # shellcheck disable=SC2016  # expanded by the inner shell
    setsid bash -c 'chrt --idle -p 0 $$ >/dev/null 2>&1 || renice -n 19 $$ >/dev/null; "$@"' \
        background "$@" >"$background_log" 2>&1 &
    background_pid=$!
    export -nf build && export -n jobs
}
finish_background() {
    local status=0
    wait "$background_pid" || status=$?
    background_pid=
    cat "$background_log"
    [ "$status" = 0 ] || { echo "test.sh: that step failed ($status)" >&2; exit 1; }
}
trap '[ -z "$background_pid" ] || kill -- "-$background_pid" 2>/dev/null || true' EXIT

# Line tables only (-g1): backtraces and sanitizer reports keep file:line, and the builds
# take a quarter (-O2) or a seventh (-O0 with ASan) less time than with full -g. Every build
# is a unity build of the libraries, programs and tests (16 sources a compile: about half
# the libraries' compile time against one at a time, and 0.85x that of 8, measured on the ASan
# build of the roles, http and protocol libraries; a quarter of the unit tests'; 4 for the
# integration tests), and all tests compile without optimisation.
# The tests precompile the third-party headers they share (ZKD_TEST_PCH: about a third less
# compile time for a unit test, a fifth for an integration test). A source that misses an
# include still fails in a default build (neither unity nor precompiled headers), and in the
# fuzz build for the parsers. The programs link with lld (ZKD_LINKER: about 0.3x GNU ld's time).
unity=(-DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=16 -DZKD_TEST_PCH=ON -DZKD_LINKER=lld)
plain=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" "${unity[@]}")
start=$(date +%s)
if [ "$quick" = 1 ]; then
    build build/test all "${plain[@]}" -DZKD_INTEGRATION_TESTS=ON -DZKD_UNIT_TEST_SHARDS=0
    check build/test
    echo "== all tests of build/test passed in $(( $(date +%s) - start )) s"
    exit 0
fi

# The integration tests are built and run once, under ASan+UBSan (below): the optimised build
# runs the unit tests and the tests that drive its programs from outside
# (ZKD_INTEGRATION_TESTS=OFF). Building and running the integration tests in both took about
# an eighth of this command's time (their compile and run in the optimised build).
# The unit tests in 4 GoogleTest shards, here and under ASan: a process per unit test costs
# more than most unit tests (under ASan about 35 s of the run as 600 processes, 6 s as 4).
build build/test all "${plain[@]}" -DZKD_INTEGRATION_TESTS=OFF -DZKD_UNIT_TEST_SHARDS=4
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export LSAN_OPTIONS="suppressions=$PWD/tools/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
in_background build/asan.log build build/asan all -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 \
    -DZKD_SANITIZE=address -DZKD_UNIT_TEST_SHARDS=4 -DZKD_INTEGRATION_TESTS=ON "${unity[@]}"
check build/test
finish_background

# The ASan build's tests run alone: under ASan a zkd command takes a few tenths of a second
# to start, and beside a build its tests' timing assumptions failed (tried once).
check build/asan

export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
# The TSan build, of only what its tests need (tests/CMakeLists.txt, zkd_tsan_tests), compiles
# while the fuzz targets run (a fuzz target keeps one core busy, and is bounded by time).
in_background build/tsan.log build build/tsan zkd_tsan_tests -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DZKD_SANITIZE=thread "${unity[@]}"
tools/fuzz.sh --seconds 4
finish_background
check build/tsan -L threads
echo "== all tests passed in $(( $(date +%s) - start )) s"
