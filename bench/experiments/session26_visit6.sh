#!/usr/bin/env bash
# Session 26, visit 6: gate/up's activations gathered by the producer warpgroup again, with its copies conflict-free
# ("persg2", session26_moe_prefill_producer_gathers_x_conflict_free.patch on ddf79e4 = 024dda0's kernels). Visit 1's
# persg lost (gate/up 896 against 591 us per layer at pp 4096, the gather kernel's 94 us saved): each quarter warp
# of the producer copied 8 pieces of one pair, 128 bytes apart in the image, on the same banks (8-way), up to 16 KB
# per stage. Now a quarter warp copies one piece of 8 neighbouring pairs (one 128-byte run). The tiny MoE prefill
# tests first under a timeout (a hang drops it), then every GPU test, memcheck of the tiny MoE prefill tests, the
# A/B against head27 (= 024dda0) in two rounds at pp 512, 4096, 16384, and its prefill timeline.
# Build here: bench/tools/build_variant.sh - head27; ... session26_moe_prefill_producer_gathers_x_conflict_free.patch
# persg2. Carry build/carry.tar.xz.
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
variants="head27"
t=build/exp/imp_gpu_tests_persg2
timeout 60 $t --gtest_filter='*MoePrefill*Tiny*' > "$out/gpu_tests_persg2_tiny.log" 2>&1; rc=$?; echo "persg2 tiny rc=$rc"
if [ $rc = 0 ]; then
  timeout 300 $t > "$out/gpu_tests_persg2.log" 2>&1; rc=$?; echo "persg2 all gpu tests rc=$rc"
  grep -E "golden-cuda|FAILED|PASSED|tests ran" "$out/gpu_tests_persg2.log" | tail -12
  timeout 60 compute-sanitizer --tool memcheck --error-exitcode 3 $t --gtest_filter='*MoePrefill*Tiny*' > "$out/memcheck_persg2.log" 2>&1
  mc=$?; echo "persg2 memcheck rc=$mc"; grep -E "ERROR SUMMARY" "$out/memcheck_persg2.log"
  [ $rc = 0 ] && [ $mc = 0 ] && variants="$variants persg2"
else
  tail -4 "$out/gpu_tests_persg2_tiny.log"
fi
VARIANTS="$variants" TL_VARIANTS="persg2" AB_ARGS="--pp 512,4096,16384 --tg 1 --context 1 --runs 5" \
  bash bench/tools/variants_visit.sh
