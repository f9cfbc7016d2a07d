#!/usr/bin/env bash
# Prepared in session 35 for the next session's first visit: f7d6b01 (the attention partial kernels without their
# early-load path; compiled, not run) validated and measured.
# - The whole GPU suite (116 tests: the three early-load attention tests became two full-selection ones).
# - memcheck on the attention tests, golden ple_qsa and long_sparse.
# - A/B against f884e23 (the last measured tree) at 1K / 32K, two rounds.
# Build: bench/tools/build_variant.sh - f7d6b01 on f7d6b01's tree, and on a worktree of f884e23 (or by reverting
# f7d6b01's src and tests changes) the base: build/exp/imp_f884e23. Carry build/carry.tar.xz
# (build/exp/imp_{f884e23,f7d6b01}{,.label}, build/exp/imp_gpu_tests_f7d6b01, build/cuda/bin/lib).
set -uo pipefail
R=$OUT/raw; mkdir -p $R
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
timeout 300 build/exp/imp_gpu_tests_f7d6b01 > $R/gpu_tests.log 2>&1; echo "gpu tests rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED|golden-cuda" $R/gpu_tests.log | tail -12
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_f7d6b01 \
  --gtest_filter='GpuAttention*:*Golden*/ple_qsa:*Golden*/long_sparse' > $R/memcheck.log 2>&1; echo "memcheck rc=$?"; tail -1 $R/memcheck.log
tar -czf $OUT/tests.tar.gz -C $R . && rm -rf $R
OUT=$OUT/ab VARIANTS="f884e23 f7d6b01" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= \
  bash bench/tools/variants_visit.sh
