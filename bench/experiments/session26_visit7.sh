#!/usr/bin/env bash
# Session 26, visit 7: the wgmma flash attention with a TMA producer ("fat", session26_attention_prefill_wgmma_tma.patch
# on 1780150 = 024dda0's kernels). Visit 5's Nsight Compute put fab's time in its producer (a cp.async per lane and
# row, a third of the kernel's instructions) and in the consumers' wait for the next K tile. Now one thread copies
# each tile by tensor copies: boxes of 64 inputs x the page's rows with the 128-byte swizzle, read by wgmma through
# swizzled descriptors (K K-major, V MN-major); the KV pool is zeroed at creation (whole pages are copied, rows past
# a sequence's end masked). Its attention prefill tests first (pages of 64 and of 16 tokens), then the golden and
# prefill tests, memcheck of the small attention shapes, the A/B against head27 at pp 4096 and its timeline.
# Build here: bench/tools/build_variant.sh - head27 (any tree with 024dda0's kernels); ... session26_attention_prefill_wgmma_tma.patch
# fat. Carry build/carry.tar.xz.
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
variants="head27"; tl=""
t=build/exp/imp_gpu_tests_fat
timeout 60 $t --gtest_filter='*AttentionPrefill*' > "$out/gpu_tests_fat_attention.log" 2>&1; rc=$?; echo "fat attention tests rc=$rc"
grep -E "attention prefill.*D=256|Failure|rror|FAILED|PASSED" "$out/gpu_tests_fat_attention.log" | head -12
if [ $rc = 0 ]; then
  timeout 120 $t --gtest_filter='*Golden*:*Prefill*' > "$out/gpu_tests_fat.log" 2>&1; rc=$?; echo "fat golden/prefill tests rc=$rc"
  grep -E "golden-cuda.*(long|nvfp4|qsa)|FAILED|PASSED" "$out/gpu_tests_fat.log" | tail -5
  timeout 60 compute-sanitizer --tool memcheck --error-exitcode 3 $t --gtest_filter='*AttentionPrefill*Small*' > "$out/memcheck_fat.log" 2>&1
  mc=$?; echo "fat memcheck rc=$mc"; grep -E "ERROR SUMMARY" "$out/memcheck_fat.log"
  [ $rc = 0 ] && [ $mc = 0 ] && { variants="$variants fat"; tl="fat"; }
fi
VARIANTS="$variants" TL_VARIANTS="$tl" TL_PATTERN="^(attention_prefill|steps)" \
  AB_ARGS="--pp 4096 --tg 1 --context 1 --runs 5" bash bench/tools/variants_visit.sh
