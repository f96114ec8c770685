#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# A served program speaking docs/exec.md's framing with nothing but the standard library (the
# tests' served type). args: {"echo":V} answers V; {"pid":1} its pid; {"progress":F} reports F
# first; {"chatter":N} N progress frames (the last 0.5, "step N") and N debug log frames,
# then a warn one ("loud é"); {"crash":N} exits with N mid-task; {"hang":1} ignores everything; {"wait_cancel":1}
# answers only a cancel; {"fail":M} fails with code bad_args; {"gate":F} answers once file F
# exists; {"spawn":1} starts two sleeps (one in a session of its own) and answers their pids
# with its own. argv[1], if given: a file whose
# existence makes it exit 1 before it says ready (a program that cannot start). argv[2], if
# given: a file that, when it is absent, it creates, says ready, and exits 7 a second later
# without reading its stdin (a process that dies just as it is handed a task).
import json, os, subprocess, sys, time
if len(sys.argv) > 1 and os.path.exists(sys.argv[1]):
    sys.exit(1)
def send(**frame):
    sys.stdout.write(json.dumps(frame) + "\n"); sys.stdout.flush()
send(op="ready", protocol=1)
if len(sys.argv) > 2 and not os.path.exists(sys.argv[2]):
    open(sys.argv[2], "w").close()
    time.sleep(1)
    os._exit(7)
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("op") != "task":
        continue
    tid, args = msg["id"], msg["args"]
    if "crash" in args:
        os._exit(args["crash"])
    if "hang" in args:
        time.sleep(3600)
    if "progress" in args:
        send(op="progress", id=tid, fraction=args["progress"], message="halfway")
    if "chatter" in args:
        n = args["chatter"]
        for i in range(1, n + 1):
            send(op="progress", id=tid, fraction=i / n / 2, message=f"step {i}")
            send(op="log", level="debug", message=f"quiet {i}")
        send(op="log", level="warn", message="loud \u00e9")
    if "gate" in args:
        while not os.path.exists(args["gate"]):
            time.sleep(0.02)
    if "spawn" in args:
        kids = [subprocess.Popen(c).pid for c in (["setsid", "sleep", "300"], ["sleep", "300"])]
        send(op="result", id=tid, value=kids + [os.getpid()])
    elif "wait_cancel" in args:
        for other in sys.stdin:
            if json.loads(other) == {"op": "cancel", "id": tid}:
                break
        send(op="error", id=tid, code="cancelled", message="stopped as asked")
    elif "fail" in args:
        send(op="error", id=tid, code="bad_args", message=args["fail"])
    elif "pid" in args:
        send(op="result", id=tid, value={"pid": os.getpid(), "env": os.environ.get("ZKD_SERVE")})
    else:
        send(op="result", id=tid, value=args.get("echo"))
