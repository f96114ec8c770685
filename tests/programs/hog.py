#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# A program that goes over the limit its args name (the tests of docs/exec.md "Limits"), run
# once per task (args on stdin) or served (ZKD_SERVE=1: docs/exec.md's framing). args:
# {"hog":"memory"} allocates (and touches) 16 MiB at a time until it fails; "cpu" spins;
# "files" opens /dev/null until it fails; "procs" starts sleeps until a fork fails (at most
# 64, then it answers how many it started); anything else answers {"ok":true,"pid":PID}.
# A failure is not caught: the program dies with Python's traceback on stderr.
import json, os, subprocess, sys

def work(args):
    hog = args.get("hog")
    if hog == "memory":
        held = []
        while True:
            held.append(b"\x01" * (16 << 20))
    if hog == "cpu":
        while True:
            pass
    if hog == "files":
        held = []
        while True:
            held.append(open("/dev/null"))
    if hog == "procs":
        kids = [subprocess.Popen(["sleep", "30"]) for _ in range(64)]
        return {"started": len(kids)}
    return {"ok": True, "pid": os.getpid()}

if os.environ.get("ZKD_SERVE") != "1":
    json.dump(work(json.load(sys.stdin)), sys.stdout)
    sys.exit(0)

def send(**frame):
    sys.stdout.write(json.dumps(frame) + "\n"); sys.stdout.flush()
send(op="ready", protocol=1)
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("op") == "task":
        send(op="result", id=msg["id"], value=work(msg["args"]))
