#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A served task type that reports progress: counts the primes below N, in chunks, and
stops when cancelled (docs/python.md).

    zkd run --serve "primes=examples/python/served_primes.py"
    zkd submit primes '{"below": 2000000}' --wait      # a progress bar on a terminal

args: {"below": N} (2 <= N <= 100,000,000), optional "chunk" (numbers per progress
report, default N/20). value: {"below": N, "count": C}. Bad args fail the task with the
code bad_args."""

import logging
import math

import zkd

log = logging.getLogger("primes")


def is_prime(n: int) -> bool:
    if n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    for d in range(3, math.isqrt(n) + 1, 2):
        if n % d == 0:
            return False
    return True


@zkd.task("primes")
def primes(args):
    if not isinstance(args, dict) or not isinstance(args.get("below"), int):
        raise zkd.TaskError('expects {"below": N}', code="bad_args")
    below = args["below"]
    if not 2 <= below <= 100_000_000:
        raise zkd.TaskError("below must be from 2 to 100000000", code="bad_args")
    chunk = args.get("chunk") or max(1, below // 20)
    ctx = zkd.task_context()
    if ctx is not None:
        log.info("task %s attempt %d (epoch %d): primes below %d", ctx.id, ctx.attempt, ctx.epoch, below)
    count = 0
    for start in range(0, below, chunk):
        # Raises zkd.Cancelled once zkd asked to stop (a cancel, or the task's timeout).
        zkd.progress(start / below, f"{count} primes below {start}")
        count += sum(1 for n in range(start, min(start + chunk, below)) if is_prime(n))
    return {"below": below, "count": count}


if __name__ == "__main__":
    zkd.serve()
