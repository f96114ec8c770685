#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the .deb from this build (tools/package.sh --no-build) and checks it:
# - contents and control data (dpkg-deb -c/-I): the programs, man pages, unit, conffile,
#   sysusers entry, maintainer scripts; library dependencies found by dpkg-shlibdeps;
# - the unit (systemd-analyze verify against the installed root);
# - an install into a scratch root with dpkg itself (dpkg --root, the maintainer scripts run
#   with DPKG_ROOT): the zkd user is created there, the packaged zkd runs with the packaged
#   config against a real ZooKeeper (started by the packaged zkd-zk-local), serves a task and
#   drains on SIGTERM; a reinstall keeps an edited conffile; purge removes what it should.
# Not covered: systemd running the unit (no systemd as PID 1 here), apt resolving the
# dependencies (the scratch root's dpkg database is empty: --force-depends).
# Added by tests/install.cmake: package_test.sh SOURCE_DIR BUILD_DIR WORK_DIR VERSION
# Exit 77 (skipped) without Java/ZooKeeper, unless ZKD_REQUIRE_ZK=1 or CI=true.
set -euo pipefail
source=$1 build=$2 work=$3 version=$4

fail() { echo "package_test: FAIL: $*" >&2; exit 1; }
step() { echo "== $*"; }

# dpkg --root installs files owned by root, as CI can (like the netns tests, it fails
# rather than skips without).
[ "$(id -u)" = 0 ] || fail "needs root (dpkg --root into a scratch root)"

rm -rf "$work"
mkdir -p "$work"
root=$work/root
zk_dir=$work/zk
zkd_pid=
# Stops the ZooKeeper we started, with the packaged zkd-zk-local or, once the package is
# purged, the build's (a purged one left the server running after every test run).
stop_zk() {
    local bin=$root/usr/bin/zkd-zk-local
    [ -x "$bin" ] || bin=$build/tools/zk_local/zkd-zk-local
    [ ! -d "$zk_dir" ] || "$bin" stop --dir "$zk_dir" >/dev/null 2>&1
}
cleanup() {
    [ -z "$zkd_pid" ] || kill -KILL "$zkd_pid" 2>/dev/null || true
    stop_zk || true
}
trap cleanup EXIT

step "tools/package.sh --build-dir $build --no-build"
deb=$("$source/tools/package.sh" --build-dir "$build" --no-build --out "$work/out" | tail -1)
[ "$(basename "$deb")" = "zkd_${version}_$(dpkg --print-architecture).deb" ] || fail "unexpected package name $deb"

step "control data (dpkg-deb -I)"
field() { dpkg-deb -f "$deb" "$1"; }
[ "$(field Package)" = zkd ] || fail "Package: $(field Package)"
[ "$(field Version)" = "$version" ] || fail "Version: $(field Version), not $version"
depends=$(field Depends)
echo "Depends: $depends"
for dep in libc6 libstdc++6 libzookeeper-st2 libssl3 libboost-json1.81.0 libspdlog1.10 \
           "systemd | systemd-standalone-sysusers"; do
    grep -qF "$dep" <<<"$depends" || fail "Depends lacks $dep"
done
grep -qF zookeeper <<<"$(field Suggests)" || fail "Suggests lacks zookeeper"
grep -qF python3 <<<"$(field Suggests)" || fail "Suggests lacks python3"
info=$(dpkg-deb -I "$deb")
for f in postinst prerm postrm conffiles md5sums; do
    grep -qE "^ +[0-9]+ bytes, +[0-9]+ lines +\*? *$f( |$)" <<<"$info" || fail "no $f in the control archive: $info"
done
[ "$(dpkg-deb -I "$deb" conffiles)" = /etc/zkd/zkd.conf ] || fail "conffiles: $(dpkg-deb -I "$deb" conffiles)"

step "contents (dpkg-deb -c)"
contents=$(dpkg-deb -c "$deb")
for f in ./usr/bin/zkd ./usr/bin/zkd-loadgen ./usr/bin/zkd-zk-local ./usr/bin/zkd-chaos ./usr/bin/zkd-swarm \
         ./usr/libexec/zkd/zkd-supervise ./usr/share/man/man1/zkd.1.gz ./usr/share/man/man1/zkd-loadgen.1.gz \
         ./lib/systemd/system/zkd.service ./etc/zkd/zkd.conf ./usr/lib/sysusers.d/zkd.conf \
         ./usr/share/doc/zkd/copyright ./usr/share/doc/zkd/docs/protocol.md \
         ./usr/share/doc/zkd/docs/exec.md ./usr/share/doc/zkd/docs/python.md \
         ./usr/lib/python3/dist-packages/zkd/__init__.py ./usr/lib/python3/dist-packages/zkd/client.py \
         ./usr/lib/python3/dist-packages/zkd/serve.py; do
    grep -qE " $f\$" <<<"$contents" || fail "$f not in the package"
done
! grep -qE '\.a$|/include/|/cmake/' <<<"$contents" || fail "development files in the package"
! grep -vqE '^[-dl]r[-w][-xs]r-[-xs]r-[-xt] root/root ' <<<"$contents" || fail "a file not root-owned or not world-readable: $contents"
grep -qE '^-rwxr-xr-x root/root .* ./usr/bin/zkd$' <<<"$contents" || fail "zkd not an executable"

step "install into a scratch root (dpkg --root)"
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$root/etc"
touch "$root/var/lib/dpkg/status" "$root/var/lib/dpkg/available"
printf 'root:x:0:0:root:/root:/bin/sh\n' >"$root/etc/passwd"
printf 'root:x:0:\n' >"$root/etc/group"
dpkg_root=(dpkg --root="$root" --log=/dev/null --force-depends --force-script-chrootless)
"${dpkg_root[@]}" -i "$deb" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -i"; }
[ "$(dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${Status}' zkd)" = "install ok installed" ] || fail "zkd not installed in the scratch root"
grep -qE '^zkd:x:[0-9]+:[0-9]+:[^:]*:/var/lib/zkd:/usr/sbin/nologin$' "$root/etc/passwd" || fail "no zkd system user: $(cat "$root/etc/passwd")"
grep -q '^zkd:x:' "$root/etc/group" || fail "no zkd group"
! grep -q '^zkd:' /etc/passwd || echo "(this machine has a zkd user of its own)"
[ "$("$root/usr/bin/zkd" --version)" = "zkd $version" ] || fail "the installed zkd says $("$root/usr/bin/zkd" --version)"
# The Python module, where Debian's python3 looks (/usr/lib/python3/dist-packages).
found=$(cd / && PYTHONPATH="$root/usr/lib/python3/dist-packages" /usr/bin/python3 -c 'import zkd; print(zkd.__file__)') || fail "python3 cannot import zkd from the package"
[ "$found" = "$root/usr/lib/python3/dist-packages/zkd/__init__.py" ] || fail "zkd imported from $found"
! grep -q '__pycache__\|\.pyc$' <<<"$contents" || fail "compiled Python in the package"
zcat "$root/usr/share/man/man1/zkd.1.gz" | grep -q -e '--grace' || fail "the man page lacks zkd run's options"

step "the unit (systemd-analyze verify)"
# Against the scratch root (ExecStart must exist there), with this machine's targets that
# every service depends on; any complaint fails (bad keys or values only warn). Its man page
# (Documentation=) is checked above: `man` would look on this machine.
cp -n /lib/systemd/system/*.target "$root/lib/systemd/system/"
verify=$(systemd-analyze verify --root="$root" --man=no zkd.service 2>&1) || { echo "$verify"; fail "systemd-analyze verify"; }
[ -z "$verify" ] || { echo "$verify"; fail "systemd-analyze verify complained"; }
unit=$root/lib/systemd/system/zkd.service
grace_default=30
stop_timeout=$(sed -n 's/^TimeoutStopSec=\([0-9]*\)s$/\1/p' "$unit")
if [ -z "$stop_timeout" ] || [ "$stop_timeout" -le "$grace_default" ]; then
    fail "TimeoutStopSec (${stop_timeout:-none}) not above the default grace (${grace_default}s)"
fi
grep -qx '#grace = 30s' "$root/etc/zkd/zkd.conf" || fail "zkd.conf does not show the default grace of ${grace_default}s"

step "the packaged config: every key is one zkd knows"
sed -E 's/^#([a-z][a-z.-]* = )/\1/' "$root/etc/zkd/zkd.conf" >"$work/all.conf"
set +e
all_out=$("$root/usr/bin/zkd" run --config "$work/all.conf" --connect-timeout 1ms 2>&1)
set -e
if grep -qE "unknown key|expected 'key = value'" <<<"$all_out"; then fail "zkd.conf: $all_out"; fi

step "the packaged zkd with the packaged config against a real ZooKeeper"
if [ -n "${ZKD_TEST_ZK:-}" ]; then
    connect=$ZKD_TEST_ZK
else
    if ! connect=$("$root/usr/bin/zkd-zk-local" start --dir "$zk_dir" 2>"$work/zk.log"); then
        cat "$work/zk.log" >&2
        if { ! command -v java >/dev/null || [ ! -r /usr/share/java/zookeeper.jar ]; } &&
           [ "${ZKD_REQUIRE_ZK:-}" != 1 ] && [ "${CI:-}" != true ]; then
            echo "package_test: skipped: no Java or ZooKeeper server (tools/install-deps.sh installs them)"
            exit 77
        fi
        fail "zkd-zk-local could not start ZooKeeper"
    fi
fi
# As the unit runs it (its ExecStart), with zk and a fresh namespace from the environment.
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
[ "$exec_start" = "/usr/bin/zkd run --config /etc/zkd/zkd.conf" ] || fail "ExecStart=$exec_start"
ns="package-test-$$-$RANDOM"
cs_env=(env ZKD_ZK="$connect" ZKD_NAMESPACE="$ns")
# An exec type too: its programs run under the packaged supervisor (usr/libexec/zkd).
"${cs_env[@]}" ZKD_CAPACITY=1 "$root/usr/bin/zkd" run --config "$root/etc/zkd/zkd.conf" \
    --exec "copy=/bin/cat" >"$work/zkd.log" 2>&1 &
zkd_pid=$!
result=$("${cs_env[@]}" "$root/usr/bin/zkd" submit sum '[1,2,3]' --wait --timeout 60s --allow-unserved \
         --create-namespace --config "$root/etc/zkd/zkd.conf" 2>&1) || { cat "$work/zkd.log"; fail "submit: $result"; }
grep -q '"sum":6' <<<"$result" || fail "result: $result"
result=$("${cs_env[@]}" "$root/usr/bin/zkd" submit copy '{"copied":true}' --wait --timeout 60s \
         --config "$root/etc/zkd/zkd.conf" 2>&1) || { cat "$work/zkd.log"; fail "submit copy: $result"; }
grep -q '"copied":true' <<<"$result" || fail "exec result: $result"
kill -TERM "$zkd_pid"
rc=0
wait "$zkd_pid" || rc=$?
zkd_pid=
[ "$rc" = 0 ] || { cat "$work/zkd.log"; fail "zkd run exited $rc on SIGTERM"; }
grep -q 'left the cluster' "$work/zkd.log" || { cat "$work/zkd.log"; fail "zkd did not leave the cluster on SIGTERM"; }
stop_zk || fail "the packaged zkd-zk-local could not stop its ZooKeeper"
rm -rf "$zk_dir"

step "reinstall keeps an edited conffile; purge"
echo "namespace = edited" >>"$root/etc/zkd/zkd.conf"
"${dpkg_root[@]}" -i "$deb" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -i again"; }
grep -qx "namespace = edited" "$root/etc/zkd/zkd.conf" || fail "the reinstall replaced the edited zkd.conf"
mkdir -p "$root/var/lib/zkd"
"${dpkg_root[@]}" --purge zkd >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg --purge"; }
for f in usr/bin/zkd etc/zkd/zkd.conf lib/systemd/system/zkd.service var/lib/zkd; do
    [ ! -e "$root/$f" ] || fail "$f left after purge"
done
grep -q '^zkd:' "$root/etc/passwd" || fail "purge removed the zkd user (it must stay)"

cleanup
rm -rf "$work"
trap - EXIT
echo "package_test: passed"
