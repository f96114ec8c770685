#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs the current build into a fresh prefix (`cmake --install`), builds examples/ as a
# project of its own against that prefix only (find_package(zkd CONFIG)), and runs the
# example against a real ZooKeeper: one the installed zkd-zk-local starts, or ZKD_TEST_ZK.
# Added by tests/install.cmake:
#   install_test.sh CMAKE BUILD_DIR SOURCE_DIR WORK_DIR VERSION GENERATOR CXX [LAUNCHER]
# Exit 77 (skipped) when Java or the ZooKeeper server is missing, unless ZKD_REQUIRE_ZK=1 or
# CI=true. WORK_DIR is emptied first and removed when the test passes.
set -euo pipefail
cmake=$1 build=$2 source=$3 work=$4 version=$5 generator=$6 cxx=$7 launcher=${8:-}

fail() { echo "install_test: FAIL: $*" >&2; exit 1; }
step() { echo "== $*"; }

rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix
zk_dir=$work/zk
cleanup() {
    if [ -d "$zk_dir" ]; then
        "$prefix/bin/zkd-zk-local" stop --dir "$zk_dir" >/dev/null 2>&1 || true
    fi
}
trap cleanup EXIT

step "install $build into $prefix"
"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log" || { cat "$work/install.log"; fail "cmake --install"; }
for f in bin/zkd bin/zkd-loadgen bin/zkd-zk-local bin/zkd-chaos bin/zkd-swarm libexec/zkd/zkd-supervise \
         include/zkd/roles/node.hpp include/zkd/zkco/client.hpp include/zkd/protocol/task.hpp \
         include/zkd/reactor/compute_pool.hpp lib/libzkd_roles.a lib/cmake/zkd/zkdConfig.cmake \
         lib/cmake/zkd/zkdConfigVersion.cmake lib/cmake/zkd/zkdTargets.cmake \
         lib/cmake/zkd/FindZooKeeper.cmake; do
    [ -e "$prefix/$f" ] || fail "$f not installed"
done
# What only the Debian package installs stays out of a prefix install (and out of /etc).
for f in etc lib/systemd usr; do
    [ ! -e "$prefix/$f" ] || fail "$f installed by a plain cmake --install"
done
# The Python module, where python3 looks under a prefix other than /usr
# (lib/python3.X/dist-packages; /usr/local/lib/python3.X/dist-packages is on Debian's path).
py=/usr/bin/python3
[ -x "$py" ] || py=python3
pyver=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
pydir=$prefix/lib/python$pyver/dist-packages
for f in __init__.py client.py errors.py serve.py; do
    [ -f "$pydir/zkd/$f" ] || fail "python/zkd/$f not installed in $pydir"
done
found=$(cd / && PYTHONPATH="$pydir" "$py" -c 'import zkd; print(zkd.__file__)') || fail "python3 cannot import the installed zkd"
[ "$found" = "$pydir/zkd/__init__.py" ] || fail "python3 imported zkd from $found, not $pydir"
[ "$("$prefix/bin/zkd" --version)" = "zkd $version" ] || fail "zkd --version says '$("$prefix/bin/zkd" --version)', not 'zkd $version'"

step "configure and build examples/ against $prefix only"
# No package registry, no system zkd: only the prefix can satisfy find_package(zkd).
config_args=(-S "$source/examples" -B "$work/example" -G "$generator"
             "-DCMAKE_CXX_COMPILER=$cxx" -DCMAKE_BUILD_TYPE=Debug
             "-DCMAKE_PREFIX_PATH=$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
[ -z "$launcher" ] || config_args+=("-DCMAKE_CXX_COMPILER_LAUNCHER=$launcher")
"$cmake" "${config_args[@]}" >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; fail "configuring examples/"; }
grep -q "zkd examples: zkd $version" "$work/configure.log" || { cat "$work/configure.log"; fail "find_package(zkd) did not give version $version"; }
grep -qx "zkd_DIR:PATH=$prefix/lib/cmake/zkd" "$work/example/CMakeCache.txt" || fail "zkd_DIR is not $prefix/lib/cmake/zkd: $(grep zkd_DIR "$work/example/CMakeCache.txt")"
# The work dir is inside the build dir: look for the tree's own source and library dirs.
tree_paths=(-e "$source/src" -e "$build/src/" -e "$build/tools/")
"$cmake" --build "$work/example" --verbose >"$work/build.log" 2>&1 || { cat "$work/build.log"; fail "building examples/"; }
if grep -q "${tree_paths[@]}" "$work/build.log"; then
    fail "the example is compiled or linked with paths of the zkd tree: $(cat "$work/build.log")"
fi

step "run the example against a real ZooKeeper"
if [ -n "${ZKD_TEST_ZK:-}" ]; then
    connect=$ZKD_TEST_ZK
    rmdir "$zk_dir" 2>/dev/null || true
else
    if ! connect=$("$prefix/bin/zkd-zk-local" start --dir "$zk_dir" 2>"$work/zk.log"); then
        cat "$work/zk.log" >&2
        if ! command -v java >/dev/null || [ ! -r /usr/share/java/zookeeper.jar ]; then
            if [ "${ZKD_REQUIRE_ZK:-}" != 1 ] && [ "${CI:-}" != true ]; then
                echo "install_test: skipped: no Java or ZooKeeper server (tools/install-deps.sh installs them)"
                exit 77
            fi
        fi
        fail "zkd-zk-local could not start ZooKeeper"
    fi
fi
ns="install-test-$$-$RANDOM"
rc=0
out=$(timeout 120 "$work/example/embed_worker" --zk "$connect" --namespace "$ns" 2>&1) || rc=$?
[ "$rc" = 0 ] || { echo "$out"; fail "embed_worker exited with $rc"; }
echo "$out"
grep -qF 'reverse("hello, zkd") = "dkz ,olleh"' <<<"$out" || fail "no result from the cluster"
grep -qF "the application's ticker ran" <<<"$out" || fail "the application's loop did not run"

cleanup
rm -rf "$work"
trap - EXIT
echo "install_test: passed"
