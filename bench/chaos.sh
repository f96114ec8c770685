#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Long zkd-chaos runs (docs/chaos.md): ROUNDS rounds of DURATION at RATE tasks/s with a
# fault every ~6 s, each with its own seed (printed; set SEED to start from a given one).
# Writes each round's text and JSON report to bench/results/chaos-<date>/ and a summary.
# Usage: bench/chaos.sh [BUILD_DIR (default build/release)] [ROUNDS (3)] [DURATION (150s)] [RATE (200)]
# Extra zkd-chaos flags: CHAOS_FLAGS="--faults zkd-kill,master-kill" bench/chaos.sh ...
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
rounds=${2:-3}
duration=${3:-150s}
rate=${4:-200}
chaos=$build/tools/chaos/zkd-chaos
[ -x "$chaos" ] || { echo "no $chaos: build the zkd_chaos target first" >&2; exit 2; }
out=bench/results/chaos-$(date -u +%Y-%m-%dT%H%M)
mkdir -p "$out"
seed=${SEED:-$((RANDOM << 15 | RANDOM))}
failed=0
{
    echo "# zkd-chaos rounds, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "| round | seed | faults (by kind) | skipped | tasks | placed directly | lost | dup | wrong | leftovers | crashes | longest stall | verdict |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
} >"$out/summary.md"
for ((r = 1; r <= rounds; r++)); do
    echo "== round $r of $rounds: seed $seed, $duration at $rate tasks/s" >&2
    # shellcheck disable=SC2086 # CHAOS_FLAGS is a list of flags
    if "$chaos" --seed "$seed" --duration "$duration" --rate "$rate" --every 6s --json \
        --clean-on-pass ${CHAOS_FLAGS:-} >"$out/round-$r.json" 2>"$out/round-$r.txt"; then
        :
    else
        failed=$((failed + 1))
    fi
    tail -n 20 "$out/round-$r.txt" >&2
    if python3 - "$out/round-$r.json" "$r" >>"$out/summary.md" 2>/dev/null <<'PY'
import json, sys
j = json.loads([l for l in open(sys.argv[1]) if l.startswith("{")][-1])  # the report line
kinds = ", ".join(f"{k} {v}" for k, v in sorted(j["faults_by_kind"].items()))
left = j["leftover_pending"] + j["leftover_assigned"] + j["leftover_results"]
print(f"| {sys.argv[2]} | {j['seed']} | {sum(j['faults_by_kind'].values())} ({kinds}) | {j['faults_skipped']} | "
      f"{j['submitted']} | {j.get('placed_directly', '?')} | {j['lost']} | {j['duplicated']} | {j['wrong']} | {left} | {j['crashes']} | "
      f"{j['longest_stall_ms'] / 1000:.1f} s | {j['verdict']} |")
PY
    then :; else echo "| $r | $seed | no report (see round-$r.txt) | | | | | | | | | | error |" >>"$out/summary.md"; fi
    seed=$((seed + 1))
done
cat "$out/summary.md"
echo "reports in $out" >&2
[ "$failed" -eq 0 ]
