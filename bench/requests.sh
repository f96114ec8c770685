#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Where a task's ZooKeeper requests go (not a test): starts a ZooKeeper that logs every
# request it processes (zkd-zk-local --log-requests, forceSync on), a cluster of `zkd run`
# processes with default options, and counts the requests per task by session role (client,
# master, worker), request type and path, one task at a time and under load
# (bench/requests.py); then dumps the write transactions of a few one-at-a-time tasks from the
# transaction log (ZooKeeper's TxnLogToolkit), multis op by op.
# Usage: bench/requests.sh [--build DIR] [--out DIR] [--workers N] [--dedicated-master]
#                          [--one N] [--load N]
#   --build DIR          where zkd, zkd-loadgen, zkd-zk-local are (default build/release,
#                        built like bench/run.sh does when missing)
#   --out DIR            where the counts go (default: a temp dir, printed)
#   --workers N          `zkd run` processes with default options (default 4)
#   --dedicated-master   one more process, `zkd run --capacity 0`, started first and elected,
#                        so the master's requests are not mixed with a worker's
#   --one N              tasks run one at a time (default 300)
#   --load N             tasks submitted at once, 100 per submit call (default 5000)
# The debug log slows ZooKeeper: compare request counts, not speed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

build=build/release
out=""
workers=4
dedicated=0
one=300
load=5000
while [ $# -gt 0 ]; do
    case "$1" in
        --build) shift; build=${1:?--build needs a directory} ;;
        --out) shift; out=${1:?--out needs a directory} ;;
        --workers) shift; workers=${1:?} ;;
        --dedicated-master) dedicated=1 ;;
        --one) shift; one=${1:?} ;;
        --load) shift; load=${1:?} ;;
        -h|--help) awk 'NR > 2 && /^#/ { sub(/^# ?/, ""); print; next } NR > 2 { exit }' "$0"; exit 0 ;;
        *) echo "bench/requests.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done

# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
bench_binaries "$build"

work=$(mktemp -d "${TMPDIR:-/tmp}/zkd-requests-XXXXXX")
[ -n "$out" ] || out=$work/out
mkdir -p "$out"
out=$(cd "$out" && pwd)
zkdir=$work/zk
nodes=()
cleanup() {
    for pid in "${nodes[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${nodes[@]}"; do wait "$pid" 2>/dev/null || true; done
    "$zklocal" stop --dir "$zkdir" --keep-dir >/dev/null 2>&1 || true
    # Keep the counts, drop the ZooKeeper data (unless the results are in the work dir).
    [ "$out" = "$work/out" ] || rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

connect=$("$zklocal" start --dir "$zkdir" --force-sync --log-requests 2>/dev/null)
zklog=$zkdir/server1/server.log
echo "== ZooKeeper at $connect (forceSync on, requests logged to $zklog)"
ns=req
four() { /usr/bin/python3 - "$connect" "$1" <<'PY'
import socket, sys
host, port = sys.argv[1].split(",")[0].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=5)
s.sendall(sys.argv[2].encode())
data = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    data += b
print(data.decode(errors="replace"))
PY
}
start_node() {  # $1: name, $2...: flags
    local name=$1
    shift
    "$zkd" run --zk "$connect" --namespace "$ns" --host "$name" --log-level warn "$@" \
        >>"$work/$name.log" 2>&1 &
    nodes+=($!)
}
if [ "$dedicated" = 1 ]; then
    start_node master --capacity 0
    for _ in $(seq 1 100); do
        four dump | grep -q "/zkd/$ns/master" && break
        sleep 0.1
    done
fi
for i in $(seq 1 "$workers"); do start_node "w$i"; done
config="$workers x \`zkd run\` (default options)"
[ "$dedicated" = 1 ] && config="$config + a dedicated master (\`zkd run --capacity 0\`)"
echo "== cluster: $config"

# A warm-up: the cluster is set up, every worker registered, the client code paths warm.
"$loadgen" --zk "$connect" --namespace "$ns" --no-progress --json --workers "$workers" \
    --wait-workers 30000 --tasks 50 --concurrency 1 >"$out/warmup.json"

# Session roles from the ephemerals: /master is the master's session, /workers/<w> a
# worker's; every other session is a client (zkd-loadgen).
four dump >"$out/dump.txt"
/usr/bin/python3 - "$out/dump.txt" "$ns" >"$out/roles.txt" <<'PY'
import re, sys
ns = sys.argv[2]
sid = None
roles = {}
for line in open(sys.argv[1]):
    m = re.match(r"^0x([0-9a-f]+):", line.strip())
    if m:
        sid = m.group(1)
        continue
    path = line.strip()
    if sid and path.startswith(f"/zkd/{ns}/master"):
        roles[sid] = "master"
    elif sid and path.startswith(f"/zkd/{ns}/workers/") and roles.get(sid) != "master":
        roles[sid] = "worker"
for s, r in roles.items():
    print(s, r)
PY
echo "   sessions: $(awk '{ print $2 }' "$out/roles.txt" | sort | uniq -c | tr '\n' ' ')"

phase() {  # $1: name, $2: tasks, $3...: loadgen options
    local name=$1 tasks=$2 first last
    shift 2
    first=$(($(wc -l <"$zklog") + 1))
    "$loadgen" --zk "$connect" --namespace "$ns" --no-progress --json --workers "$workers" \
        --tasks "$tasks" "$@" >"$out/$name.json"
    sleep 1   # the last consuming deletes reach the log
    last=$(wc -l <"$zklog")
    echo "$name $first $last $tasks" >>"$out/phases.txt"
}
: >"$out/phases.txt"
echo "== one task at a time ($one tasks)"
zxid_before=$(four srvr | awk '/^Zxid:/ { print $2 }')
phase one "$one" --concurrency 1
zxid_after=$(four srvr | awk '/^Zxid:/ { print $2 }')
echo "== $load tasks submitted at once, 100 per submit call"
phase burst "$load" --concurrency "$load" --batch 100
echo "== closed loop, 128 in flight ($load tasks)"
phase closed128 "$load" --concurrency 128

/usr/bin/python3 bench/requests.py "$zklog" "$out/roles.txt" "$out/phases.txt" \
    --json "$out/requests.json" | tee "$out/requests.txt"

# The write transactions of the one-at-a-time phase, op by op (the last 5 tasks' worth).
echo "== transaction log, one at a time (zxid $zxid_before .. $zxid_after)"
cp="/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar"
for f in "$zkdir"/server1/data/version-2/log.*; do
    java -cp "$cp" -Dlog4j.configuration=file:"$zkdir/log4j.properties" \
        org.apache.zookeeper.server.persistence.TxnLogToolkit --dump "$f" 2>/dev/null || true
done >"$out/txnlog.txt"
/usr/bin/python3 - "$out/txnlog.txt" "$zxid_before" "$zxid_after" "$out/roles.txt" \
    >"$out/txnlog-one.txt" <<'PY'
import re, sys
lo, hi = int(sys.argv[2], 16), int(sys.argv[3], 16)
roles = {}
for line in open(sys.argv[4]):
    p = line.split()
    roles[int(p[0], 16)] = p[1]
keep = []
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r"session 0x([0-9a-f]+) cxid 0x[0-9a-f]+ zxid 0x([0-9a-f]+)", line)
    if m and lo < int(m.group(2), 16) <= hi:
        role = roles.get(int(m.group(1), 16), "client")
        keep.append(f"{role:7s} {line.rstrip()}")
print(f"# {len(keep)} write transactions between zxid {sys.argv[2]} and {sys.argv[3]}")
print("\n".join(keep[-40:]))
PY
head -n 1 "$out/txnlog-one.txt"
echo "== done: $out (requests.txt, requests.json, txnlog-one.txt)"
