#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A served task type that streams (bench/exec.sh --chatty): per task, args {"n": N}
(default 50) progress frames and N log frames at debug of about 200 bytes each, then its
result. Uses the zkd Python package (PYTHONPATH=python), which writes one frame per write."""

import logging

import zkd

log = logging.getLogger("chatty")
log.setLevel(logging.DEBUG)
PAD = "x" * 140  # with the frame's other members, about 200 bytes a frame


@zkd.task("chatty")
def chatty(args):
    n = int((args or {}).get("n", 50)) if isinstance(args, dict) else 50
    for i in range(n):
        zkd.progress((i + 1) / n, f"step {i + 1} of {n} {PAD[:100]}")
        log.debug("step %d of %d %s", i + 1, n, PAD)
    return n


if __name__ == "__main__":
    zkd.serve()
