#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# A zkd exec type (docs/exec.md): counts the words of the files named in the task's args.
#   zkd run --exec "wordcount=examples/exec/wordcount.py"
#   zkd submit wordcount '{"files":["README.md","docs/exec.md"]}' --wait
# "pause_ms" (optional) waits that long after each file, to watch the progress in a demo.
# Args on stdin, result on stdout, progress lines on fd 3, errors on stderr with exit 1.
import json
import os
import sys
import time


def progress(fraction, message):
    # fd 3 is the progress channel; absent when run by hand, so tolerate that.
    try:
        os.write(3, (json.dumps({"progress": fraction, "message": message}) + "\n").encode())
    except OSError:
        pass


def main():
    args = json.load(sys.stdin)
    files = args.get("files") if isinstance(args, dict) else None
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        print('expects {"files": ["path", ...]}', file=sys.stderr)
        return 2
    counts = {}
    for i, name in enumerate(files):
        try:
            with open(name, encoding="utf-8", errors="replace") as f:
                counts[name] = sum(len(line.split()) for line in f)
        except OSError as e:
            print(f"{name}: {e.strerror}", file=sys.stderr)
            return 1
        progress((i + 1) / len(files), os.path.basename(name))
        pause = args.get("pause_ms", 0)
        if isinstance(pause, (int, float)) and 0 < pause <= 60000:
            time.sleep(pause / 1000)
    json.dump({"words": counts, "total": sum(counts.values())}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
