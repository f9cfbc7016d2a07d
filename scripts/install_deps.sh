#!/usr/bin/env bash
# Installs the Debian packages imp builds with, only those missing (idempotent). Needs root or sudo.
set -euo pipefail
packages=(cmake ninja-build g++ pkg-config nlohmann-json3-dev libcli11-dev libfmt-dev libgtest-dev libgmock-dev
  libpcre2-dev libutf8proc-dev bible-kjv bible-kjv-text libcpp-httplib-dev clang-14 libclang-rt-14-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}"
sudo_cmd=""
[ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
$sudo_cmd apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
