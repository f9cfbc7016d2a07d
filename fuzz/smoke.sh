#!/usr/bin/env bash
# Builds the request-parser fuzz target with clang (libFuzzer, ASan, UBSan) and runs it on the seed corpus
# for a few seconds. CTest runs this (tests/server/tests.cmake) so the target keeps building in CI.
# Usage: fuzz/smoke.sh BUILD_DIR [SECONDS]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="$1"
seconds="${2:-20}"
clang="$(command -v clang++-14 || command -v clang++ || true)"
[ -n "$clang" ] || { echo "fuzz/smoke.sh: clang++ not found (scripts/install_deps.sh installs clang-14)" >&2; exit 1; }
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER="$clang" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j2
mkdir -p "$build/smoke_corpus"
"$build/imp_request_fuzzer" "$build/smoke_corpus" "$here/corpus/request" -max_total_time="$seconds" -max_len=4096 \
  -rss_limit_mb=2048 -artifact_prefix="$build/" -print_final_stats=1 2>&1 | tail -6
