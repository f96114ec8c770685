#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Runs a small workflow over zkd's HTTP API and prints its result as JSON (docs/python.md).

    zkd run --http :8080 &
    examples/python/workflow.py --url http://127.0.0.1:8080 3 4 5

The workflow: `numbers` echoes the numbers given, `square` maps over them (one `echo` task
per element, standing in for real work), `total` sums the numbers once every element is
done. Exit status: 0 succeeded, 1 the workflow did not (its steps on stderr), 3 the API
refused it, 4 --timeout ran out (the workflow goes on; its id on stderr)."""

import argparse
import json
import sys

import zkd


def spec(numbers):
    return {
        "name": "example",
        "steps": {
            "numbers": {"type": "echo", "args": numbers},
            "square": {"type": "echo", "map": "numbers"},
            "total": {"type": "sum", "args": numbers, "after": ["square"]},
        },
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("numbers", nargs="+", type=float)
    p.add_argument("--url", help="the API (default $ZKD_URL or http://127.0.0.1:8080)")
    p.add_argument("--timeout", type=float, help="seconds to wait for its end")
    a = p.parse_args()
    numbers = [int(n) if n.is_integer() else n for n in a.numbers]
    client = zkd.Client(a.url)
    try:
        wf = client.run_workflow(spec(numbers))
        print(f"submitted {wf.id}", file=sys.stderr)
        ended = wf.wait(timeout=a.timeout)
    except zkd.WaitTimeout:
        print(f"workflow {wf.id}: not done in time; it goes on", file=sys.stderr)
        return 4
    except zkd.ApiError as e:
        print(f"refused: {e.code}: {e.message}", file=sys.stderr)
        return 3
    if ended["status"] != "succeeded":
        for name, step in ended["steps"].items():
            print(f"  {name}: {step['status']} {step.get('error', '')}", file=sys.stderr)
        print(f"workflow {wf.id} {ended['status']}", file=sys.stderr)
        return 1
    print(json.dumps(ended["result"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
