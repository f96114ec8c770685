#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs, with apt, every Debian package zkd needs to build, test and run.
# Idempotent: when everything is present it changes nothing and prints one line.
set -euo pipefail

packages=(
    g++ cmake ninja-build make
    libboost1.81-dev libboost-json1.81-dev
    libzookeeper-mt-dev libzookeeper-st2
    libspdlog-dev libfmt-dev
    libssl-dev openssl
    libgtest-dev libgmock-dev
    zookeeper default-jre-headless
    clang-tidy clang-format
    clang libclang-rt-14-dev
    # the test builds link with lld (tools/test.sh, ZKD_LINKER)
    lld
    curl procps python3 python3-pytest python3-prometheus-client prometheus chromium
    iproute2
    # schedules' time zones (src/roles/schedule/zones.cpp) and their tests
    tzdata
    # tools/package.sh and its test: man pages, dpkg-shlibdeps, systemd-analyze, systemd-sysusers
    help2man dpkg-dev systemd
)

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
        missing+=("$p")
    fi
done

if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all ${#packages[@]} packages present"
    exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: done"
