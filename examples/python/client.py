#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Submits a task over zkd's HTTP API and prints its value as JSON (docs/python.md).

    zkd run --http :8080 &
    examples/python/client.py --url http://127.0.0.1:8080 sum '[1, 2, 3]'

Exit status: 0 succeeded, 1 the task failed (its error on stderr), 2 usage, 3 the API
refused the request, 4 --timeout ran out (the task goes on; its id on stderr)."""

import argparse
import json
import sys

import zkd


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("type")
    p.add_argument("args", nargs="?", default="null", help="the args as JSON (default null)")
    p.add_argument("--url", help="the API (default $ZKD_URL or http://127.0.0.1:8080)")
    p.add_argument("--timeout", type=float, help="seconds to wait for the result")
    p.add_argument("--priority", type=int)
    p.add_argument("--allow-unserved", action="store_true")
    a = p.parse_args()
    try:
        args = json.loads(a.args)
    except ValueError as e:
        p.error(f"ARGS is not JSON: {e}")
    client = zkd.Client(a.url)
    try:
        task = client.submit(a.type, args, priority=a.priority, allow_unserved=a.allow_unserved)
        print(f"submitted {task.id}", file=sys.stderr)
        value = task.wait(timeout=a.timeout)
    except zkd.WaitTimeout as e:
        print(f"task {e.task_id}: not done in time; it goes on", file=sys.stderr)
        return 4
    except zkd.TaskFailed as e:
        print(f"task {e.task_id} {e.state}: {e.code}: {e.message}", file=sys.stderr)
        return 1
    except zkd.ApiError as e:
        print(f"refused: {e.code} ({e.status}): {e.message}", file=sys.stderr)
        return 3
    print(json.dumps(value))
    return 0


if __name__ == "__main__":
    sys.exit(main())
