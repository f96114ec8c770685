#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Makes docs/status-page.png: a local ZooKeeper, three `zkd run` nodes (the first serving the
# status page), a minute of mixed tasks (echo, sleep, spin, some failing, one reporting
# progress), then the page in headless Chromium (tests/support/cdp_driver.py).
# Usage: tools/status_screenshot.sh BUILD_DIR [OUT.png]   (needs zkd and zkd-zk-local built,
# chromium, curl, python3)
set -euo pipefail
build=${1:?usage: tools/status_screenshot.sh BUILD_DIR [OUT.png]}
out=$(realpath -m "${2:-docs/status-page.png}")
here=$(cd "$(dirname "$0")/.." && pwd)
zkd="$build/src/zkd"
zk_local="$build/tools/zk_local/zkd-zk-local"
dir=$(mktemp -d /tmp/zkd-screenshot.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    "$zk_local" stop --dir "$dir/zk" >/dev/null 2>&1 || true
    rm -rf "$dir"
}
trap cleanup EXIT

zk=$("$zk_local" start --dir "$dir/zk")
token=screenshot-token-0123456789
echo "$token" >"$dir/token"
cat >"$dir/render.sh" <<'EOF'
#!/bin/sh
i=0
while [ $i -lt 20 ]; do
    echo "{\"progress\":$((i * 5))e-2,\"message\":\"rendering frame $i of 20\"}" >&3
    sleep 4; i=$((i + 1))
done
echo '{}'
EOF
port=$((20000 + RANDOM % 20000))
common=(--zk "$zk" --namespace demo --session-timeout 4000 --threads 2)
"$zkd" run "${common[@]}" --host node-a --capacity 4 --http "127.0.0.1:$port" \
    --http-token-file "$dir/token" --exec "render=/bin/sh $dir/render.sh" >"$dir/a.log" 2>&1 &
pids+=($!)
sleep 1  # node-a first, so that it is the master whose charts the page shows
"$zkd" run "${common[@]}" --host node-b --capacity 4 --role worker >"$dir/b.log" 2>&1 &
pids+=($!)
"$zkd" run "${common[@]}" --host node-c --capacity 2 --role worker >"$dir/c.log" 2>&1 &
pids+=($!)
api() { curl -sS -m 10 -H "Authorization: Bearer $token" -H 'Content-Type: application/json' "$@"; }
until api "http://127.0.0.1:$port/v1/cluster" | grep -q '"node-c'; do sleep 0.2; done

submit() { api -o /dev/null -X POST --data "$1" "http://127.0.0.1:$port/v1/tasks"; }
submit '{"type":"render","priority":7}'
end=$((SECONDS + 65))
n=0
while [ $SECONDS -lt $end ]; do
    n=$((n + 1))
    submit "[{\"type\":\"echo\",\"args\":$n},{\"type\":\"sleep\",\"args\":$((200 + RANDOM % 1500))},{\"type\":\"spin\",\"args\":$((10 + RANDOM % 50)),\"priority\":$((RANDOM % 10))}]"
    if [ $((n % 9)) -eq 0 ]; then submit '{"type":"fail","args":"bad input: frame 12 is corrupt"}'; fi
    sleep 0.25
done
# Leave a queue behind for the priority bars.
for p in 9 7 5 5 5 2 2 2 2 0 0 0 0 0 0; do
    submit "[{\"type\":\"sleep\",\"args\":8000,\"priority\":$p},{\"type\":\"sleep\",\"args\":8000,\"priority\":$p}]"
done
sleep 2

printf '%s\n' \
    "{\"cmd\":\"open\",\"url\":\"http://127.0.0.1:$port/#token=$token\"}" \
    '{"cmd":"wait","expr":"document.querySelectorAll(\"#workers tbody tr\").length >= 3 && document.querySelectorAll(\"#chart-throughput polyline\").length > 0","timeout_ms":20000}' \
    "{\"cmd\":\"screenshot\",\"path\":\"$out\",\"width\":1280}" \
    '{"cmd":"errors"}' '{"cmd":"quit"}' |
    python3 "$here/tests/support/cdp_driver.py" /usr/bin/chromium "$dir"
echo "wrote $out"
