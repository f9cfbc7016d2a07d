#!/usr/bin/env bash
# Session 23, visit 2: the MoE prefill GEMMs on four warpgroups of one strip per warp (wg4 =
# session23_moe_prefill_four_warpgroups.patch: 512 threads, 112 registers wide / 58 narrow, no spill) against head
# (01655ca): the full GPU suite on wg4, then pp 512 / 4096 / 16384 A/B, two rounds, and a prefill timeline of each.
# Build: bench/tools/build_variant.sh - head (committed tree), bench/tools/build_variant.sh - wg4 (patch applied).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
build/exp/imp_gpu_tests_wg4 > "$out/gpu_tests_wg4.log" 2>&1
echo "tests wg4 rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$out/gpu_tests_wg4.log" | tr '\n' ' ')"
grep -E "^\[  FAILED" "$out/gpu_tests_wg4.log" | head
timeout 120 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_wg4 \
  --gtest_filter='*MoePrefill*Tiny*:*Golden*/nvfp4' > "$out/memcheck_wg4.log" 2>&1
echo "memcheck wg4 rc=$?: $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED)' "$out/memcheck_wg4.log" | tr '\n' ' ')"
VARIANTS="head wg4" AB_ARGS="--pp 512,4096,16384 --tg 1 --context 1 --runs 5" TL_VARIANTS="head wg4" bash bench/tools/variants_visit.sh
