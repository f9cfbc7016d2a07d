#!/usr/bin/env bash
# Session 22, third visit: the E4M3 block scales stored so that each lane's pair (rows g and g + 8 of tile c) is one
# 16-bit word, converted by one cvt.rn.f16x2.e4m3x2 (decode: 4 instructions per unit for both scales instead of 11;
# prefill: one 8-byte load per strip and chunk). sc = the working tree with it, head2 = a8c0e12 (the rotate-and-mask
# decode). Every GPU test and a memcheck subset on sc, then decode and prefill A/B, two rounds.
# Build here first: (git stash; bench/tools/build_variant.sh - head2; git stash pop; bench/tools/build_variant.sh - sc)
# Carry build/carry.tar.xz (build/exp/imp_{head2,sc}, build/exp/imp_gpu_tests_sc, build/cuda/bin/lib).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
build/exp/imp_gpu_tests_sc > "$out/gpu_tests_sc.log" 2>&1
echo "tests sc rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$out/gpu_tests_sc.log" | tr '\n' ' ')"
grep -E "^\[  FAILED|golden-cuda" "$out/gpu_tests_sc.log" | head -20
timeout 120 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_sc \
  --gtest_filter='*MoeDecodeFused*:*Golden*/nvfp4:*Golden*/many_experts' > "$out/memcheck_sc.log" 2>&1
echo "memcheck sc rc=$?: $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED)' "$out/memcheck_sc.log" | tr '\n' ' ')"
VARIANTS="head2 sc" AB_ARGS="--pp 4096 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= bash bench/tools/variants_visit.sh
