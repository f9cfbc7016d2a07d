#!/usr/bin/env bash
# Session 24, visit 5: the MoE prefill GEMMs with their activations from per-tile images by one bulk copy per stage
# and their weights by tensor copies (tma = the working tree after ce696e2), against grid (= ce696e2). Session 24's
# probe (bench/experiments/wgmma_rs_pattern_probe.cu) put the gathered cp.async activation copies at ~30% of a
# chunk's time (1875 -> 1405 cycles at N = 80). Tests and memcheck of tma first, each under a time limit (a wrong
# barrier count would hang), then the A/B and timelines.
# Build here: bench/tools/build_variant.sh - tma (and build/exp/imp_grid from session24_visit.sh).
# Carry build/carry.tar.xz (build/exp/imp_{grid,tma}, build/exp/imp_gpu_tests_tma, build/cuda/bin/lib, build/exp/lib,
# build/exp/libkernel_timeline.so).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
timeout 240 build/exp/imp_gpu_tests_tma --gtest_filter='*MoePrefill*:*Golden*:*Prefill*' > "$out/gpu_tests_tma.log" 2>&1
echo "tests tma rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$out/gpu_tests_tma.log" | tr '\n' ' ')"
grep -E "^\[  FAILED|Failure|error" "$out/gpu_tests_tma.log" | head -8
timeout 120 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_tma \
  --gtest_filter='*MoePrefill*Tiny*:*Golden*/nvfp4' > "$out/memcheck_tma.log" 2>&1
echo "memcheck tma rc=$?: $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED)' "$out/memcheck_tma.log" | tr '\n' ' ')"
VARIANTS="grid tma" AB_ARGS="--pp 512,4096,16384 --tg 1 --context 1 --runs 5" timeout 330 bash bench/tools/variants_visit.sh
