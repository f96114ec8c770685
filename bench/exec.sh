#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Exec types (docs/exec.md): tasks/s of a trivial program (/bin/true, a text type) through
# one worker, against running it directly from a shell loop; and a script type's output
# streamed by 2 x cores programs at once, with the worker's event-loop lag meanwhile.
# Usage: bench/exec.sh [BUILD_DIR (default build/release)] [TASKS (default 2000)]
#        bench/exec.sh --chatty [BUILD_DIR] [TASKS or a duration, e.g. 60s] [ROUNDS (default 2)]
#   --chatty: the worker's event-loop lag while 8 warm processes of a served Python type
#   (bench/chatty.py) each write, per task, 50 progress and 50 log frames (debug, below the
#   node's info) of about 200 bytes before the result; ROUNDS rounds of zkd-loadgen
#   --tasks TASKS (or --duration) --concurrency 16, each followed by zkd_event_loop_lag_seconds
#   from /metrics, and the loop thread's time on a CPU and waiting for one meanwhile
#   (/proc/PID/task/PID/schedstat). CHATTY_N=K: K frames of each
#   kind instead of 50. CHATTY_NICE=N: the programs at `exec.chatty.nice = N` (default: unset).
# Needs python3; starts its own ZooKeeper (zkd-zk-local) and one `zkd run`.
set -euo pipefail
cd "$(dirname "$0")/.."
chatty=
if [ "${1:-}" = --chatty ]; then
    chatty=1
    shift
fi
build=${1:-build/release}
n=${2:-2000}
zkd=$build/src/zkd
dir=$(mktemp -d "${TMPDIR:-/tmp}/zkd-bench-exec-XXXXXX")
node=
cleanup() {
    [ -n "$node" ] && kill -TERM "$node" 2>/dev/null && wait "$node" 2>/dev/null || true
    "$build/tools/zk_local/zkd-zk-local" stop --dir "$dir/zk" >/dev/null 2>&1 || true
    rm -rf "$dir"
}
trap cleanup EXIT
connect=$("$build/tools/zk_local/zkd-zk-local" start --dir "$dir/zk" 2>/dev/null)
cores=$(nproc)
cat >"$dir/stream.sh" <<'SH'
#!/bin/sh
head -c 500000 /dev/zero | tr '\0' x
SH
chmod +x "$dir/stream.sh"
cat >"$dir/zkd.conf" <<CONF
exec.true = /bin/true
exec.true.output = text
exec.stream = $dir/stream.sh
exec.stream.output = text
exec.stream.max-output = 512KiB
CONF
port=$((20000 + RANDOM % 20000))
if [ -n "$chatty" ]; then
    rounds=${3:-2}
    cat >"$dir/zkd.conf" <<CONF
exec.chatty = $(python3 -c "import sys; print(sys.executable)") $PWD/bench/chatty.py
exec.chatty.mode = serve
exec.chatty.warm = 8
exec.chatty.env = PYTHONPATH=$PWD/python
${CHATTY_NICE:+exec.chatty.nice = $CHATTY_NICE}
CONF
    "$zkd" run --zk "$connect" --namespace bench --capacity 8 --threads 2 \
        --http "127.0.0.1:$port" --config "$dir/zkd.conf" --log-level info >"$dir/node.log" 2>&1 &
    node=$!
    metric() { # NAME{LABELS} -> its value from /metrics
        curl -fsS "http://127.0.0.1:$port/metrics" | awk -v m="$1" '$1 == m { print $2 }'
    }
    # TASKS as a duration (60s): rounds that long, so that each fills the probe's 60 s window
    # and its lag figures are its own.
    case $n in
    *[0-9]) amount=(--tasks "$n") ;;
    *) amount=(--duration "$n") ;;
    esac
    echo "== $rounds rounds of $n chatty tasks ({\"n\":${CHATTY_N:-50}}: as many progress and log frames each), 8 warm processes; load $(cut -d' ' -f1-3 /proc/loadavg)"
    loop_sched() { # the node's event-loop thread (its main thread) so far: seconds on a CPU, waiting for one
        awk '{ print $1 / 1e9, $2 / 1e9 }' "/proc/$node/task/$node/schedstat"
    }
    for ((r = 1; r <= rounds; r++)); do
        sched0=$(loop_sched)
        "$build/tools/loadgen/zkd-loadgen" --zk "$connect" --namespace bench --wait-workers 60s \
            "${amount[@]}" --concurrency 16 --type chatty --args "{\"n\":${CHATTY_N:-50}}" --json --no-progress \
            >"$dir/round$r.json"
        python3 - "$dir/round$r.json" "$r" "$(metric 'zkd_event_loop_lag_seconds{quantile="0.99"}')" \
            "$(metric 'zkd_event_loop_lag_seconds{quantile="1"}')" "$sched0" "$(loop_sched)" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])).get("load", {})
tps, results = d.get("tasks_per_s", 0), d.get("results", 0)
(cpu0, wait0), (cpu1, wait1) = (map(float, a.split()) for a in sys.argv[5:7])
cpu, wait = cpu1 - cpu0, wait1 - wait0
ms = lambda v: f"{float(v) * 1000:.2f} ms" if v else "n/a"
print(f"round {sys.argv[2]}: {tps} tasks/s; event-loop lag p99 {ms(sys.argv[3])}, max {ms(sys.argv[4])}; "
      f"loop thread CPU {cpu:.2f} s "
      f"({cpu / max(results, 1) * 1e6:.0f} us a task), waited {wait:.2f} s for a CPU")
PY
    done
    echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
    exit 0
fi
"$zkd" run --zk "$connect" --namespace bench --capacity 8 --threads 1 \
    --http "127.0.0.1:$port" --config "$dir/zkd.conf" --log-level warn >"$dir/node.log" 2>&1 &
node=$!

echo "== directly: $n runs of /bin/true from a shell loop (args on stdin)"
start=$(date +%s.%N)
for ((i = 0; i < n; i++)); do echo "$i" | /bin/true || true; done
end=$(date +%s.%N)
python3 -c "import sys; s,e,n=float(sys.argv[1]),float(sys.argv[2]),int(sys.argv[3]); print(f'{n/(e-s):.0f} runs/s ({(e-s)/n*1e6:.0f} us each)')" "$start" "$end" "$n"

python3 - "$port" "$n" "$cores" <<'PY'
import json, sys, time, urllib.request
port, n, cores = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
base = f"http://127.0.0.1:{port}"
def call(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    r = urllib.request.Request(base + path, data=data, method=method,
                               headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(r, timeout=30) as f:
        return f.read()
def cluster():
    return json.loads(call("GET", "/v1/cluster"))
for _ in range(600):
    try:
        if cluster()["workers"]:
            break
    except Exception:
        pass
    time.sleep(0.1)
def run(kind, count):
    t0 = time.monotonic()
    for i in range(0, count, 500):
        call("POST", "/v1/tasks", [{"type": kind, "args": i + k} for k in range(min(500, count - i))])
    while cluster()["results"] < count:
        time.sleep(0.02)
    return time.monotonic() - t0
print(f"== through one worker (capacity 8, 1 compute thread): {n} tasks of /bin/true")
took = run("true", n)
print(f"{n/took:.0f} tasks/s ({took/n*1e6:.0f} us each, submit to result stored)")
def lag():
    for line in call("GET", "/metrics").decode().splitlines():
        if line.startswith('zkd_event_loop_lag_seconds{quantile="0.99"}'):
            return float(line.split()[-1])
    return float("nan")
time.sleep(2)
idle = lag()
m = 2 * cores
print(f"== {m} programs (2 x cores) at once, each streaming 500 KB to stdout")
before = cluster()["results"]
t0 = time.monotonic()
call("POST", "/v1/tasks", [{"type": "stream", "args": k} for k in range(m)])
worst = 0.0
while cluster()["results"] < before + m:
    worst = max(worst, lag())
    time.sleep(0.05)
print(f"{m} tasks in {time.monotonic()-t0:.2f} s; event-loop lag p99: {idle*1000:.1f} ms idle before, "
      f"at most {worst*1000:.1f} ms meanwhile")
PY
