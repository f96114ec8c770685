#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The long fuzz run (not part of the test command, which gives each target 4 s): every
# libFuzzer target of tests/fuzz for 300 s (an hour in all), through tools/fuzz.sh. The
# inputs it finds stay in build/fuzz/corpus/<target>/ and make the next run start further;
# copy the interesting ones (a crash once fixed, new coverage) to tests/fuzz/corpus/<target>/.
# Usage: bench/fuzz.sh [--seconds N] [--seed S] [TARGET...]   (default --seconds 300)
set -euo pipefail
cd "$(dirname "$0")/.."
case " $* " in
    *" --seconds "*) exec tools/fuzz.sh "$@" ;;
    *) exec tools/fuzz.sh --seconds 300 "$@" ;;
esac
