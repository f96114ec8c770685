#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the libFuzzer targets (tests/fuzz, clang, ASan+UBSan) in build/fuzz and runs each
# for a bounded time from its corpus, with a fixed seed. Fails on the first crash, leak,
# timeout or broken property, printing the reproducer and the command that replays it.
# Usage: tools/fuzz.sh [--seconds N] [--seed S] [--build-only] [TARGET...]
#   --seconds N   run each target N seconds (default 4: about a minute for all twelve)
#   --seed S      libFuzzer's -seed (default 1)
#   --build-only  configure and build, run nothing
#   TARGET...     only these (task result bundle worker master meta epoch crack_job ids
#                 config http_request http_submit); default: all
# New inputs go to build/fuzz/corpus/<target>/ (tests/fuzz/corpus/<target>/ is only read);
# crashes to build/fuzz/crashes/<target>-crash-<sha1>, logs to build/fuzz/logs/.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

seconds=4
seed=1
build_only=0
targets=()
while [ $# -gt 0 ]; do
    case "$1" in
        --seconds) shift; seconds=${1:?--seconds needs a number} ;;
        --seed) shift; seed=${1:?--seed needs a number} ;;
        --build-only) build_only=1 ;;
        -h|--help) sed -n '3,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "fuzz.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
        *) targets+=("$1") ;;
    esac
    shift
done
case "$seconds" in ''|*[!0-9]*) echo "fuzz.sh: --seconds wants a whole number, not '$seconds'" >&2; exit 2 ;; esac

all=(task result bundle worker master meta epoch crack_job ids config http_request http_submit)
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")

# The largest input worth trying, per target (a task may be 512 KiB, but its structure shows
# in far less), and the dictionary of tokens that helps it.
max_len() {
    case "$1" in
        ids) echo 256 ;;
        config) echo 2048 ;;
        crack_job) echo 8192 ;;
        *) echo 4096 ;;
    esac
}
dict() {
    case "$1" in
        ids|config) ;;
        http_request) echo "-dict=$root/tests/fuzz/http.dict" ;;
        *) echo "-dict=$root/tests/fuzz/json.dict" ;;
    esac
}

command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found (tools/install-deps.sh installs clang)" >&2; exit 1; }
build=build/fuzz
launcher=()
if command -v ccache >/dev/null; then
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
echo "== configure and build $build (clang, libFuzzer + ASan + UBSan)"
CC=clang CXX=clang++ cmake -S tests/fuzz -B "$build" -G Ninja -DZKD_WERROR=ON "${launcher[@]}" >/dev/null
names=()
for t in "${targets[@]}"; do names+=("fuzz_$t"); done
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" --target "${names[@]}"
[ "$build_only" = 1 ] && exit 0

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
mkdir -p "$build/crashes" "$build/logs"
echo "== fuzz ${#targets[@]} targets, ${seconds} s each, seed $seed"
start=$(date +%s)
for t in "${targets[@]}"; do
    [ -d "tests/fuzz/corpus/$t" ] || { echo "fuzz.sh: no target '$t' (tests/fuzz/corpus/$t missing)" >&2; exit 2; }
    mkdir -p "$build/corpus/$t"
    log="$build/logs/$t.log"
    # shellcheck disable=SC2046  # dict is one word or none
    if "$build/fuzz_$t" -seed="$seed" -max_total_time="$seconds" -max_len="$(max_len "$t")" \
        -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 $(dict "$t") \
        -artifact_prefix="$build/crashes/$t-" "$build/corpus/$t" "tests/fuzz/corpus/$t" \
        >"$log" 2>&1; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
        printf '%-13s ok  %9s runs, corpus %s\n' "$t" "${runs:-?}" "$(ls "$build/corpus/$t" | wc -l)"
    else
        echo "fuzz.sh: $t FAILED; the end of $log:" >&2
        grep -v '^#[0-9]' "$log" | tail -40 >&2
        artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
        if [ -n "$artifact" ]; then
            echo "fuzz.sh: reproducer: $artifact" >&2
            echo "fuzz.sh: replay it with: $build/fuzz_$t $artifact" >&2
        fi
        exit 1
    fi
done
echo "== fuzzing passed in $(( $(date +%s) - start )) s"
