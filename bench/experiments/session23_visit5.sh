#!/usr/bin/env bash
# Session 23, visit 5: the MoE prefill GEMM's wgmma width in steps of 16 pairs instead of 32 (n16 =
# session23_moe_prefill_n16.patch: N = 16 .. 128 wide, 16 or 32 narrow; 204 / 106 registers, no spill), so a
# slot's ~80 pairs at pp 4096 run N = 80 instead of 96 and ~10 pairs at pp 512 run N = 16 instead of 32. Its MoE
# prefill and golden tests, then pp A/B against head (01655ca), two rounds, medians of 5, and a prefill timeline
# of each.
# Build: bench/tools/build_variant.sh bench/experiments/session23_moe_prefill_n16.patch n16
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
build/exp/imp_gpu_tests_n16 --gtest_filter='*MoePrefill*:*Golden*:*Prefill*' > "$out/gpu_tests_n16.log" 2>&1
echo "tests n16 rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$out/gpu_tests_n16.log" | tr '\n' ' ')"
grep -E "^\[  FAILED" "$out/gpu_tests_n16.log" | head -5
VARIANTS="head n16" AB_ARGS="--pp 512,4096,16384 --tg 1 --context 1 --runs 5" TL_VARIANTS="head n16" bash bench/tools/variants_visit.sh
