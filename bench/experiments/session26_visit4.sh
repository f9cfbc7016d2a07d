#!/usr/bin/env bash
# Session 26, visit 4: the wgmma flash attention with its producer's copies remapped ("fab", "fa2b": the fa and fa2
# patches after visit 3). Visit 3 found both correct (every attention, golden and prefill test; memcheck clean)
# but slower than the mma.sync kernel (864 / 886 us per layer against 734 at pp 4096): a lane per 16 bytes of one
# key row put each quarter warp's cp.async writes 128 bytes apart in shared memory, on the same banks (8-way), so
# one 64 KB K + V tile took the producer ~2 us, longer than its wgmmas. Now each quarter warp fills one 128-byte
# core matrix (8 keys x 8 inputs). Same steps as visit 3, against head27 (= 024dda0).
# Build here: bench/tools/build_variant.sh - head27; ... session25_attention_prefill_wgmma.patch fab; ...
# session25_attention_prefill_wgmma_overlap.patch fa2b. Carry build/carry.tar.xz.
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
variants="head27"; tl=""
for v in fab fa2b; do
  t=build/exp/imp_gpu_tests_$v
  timeout 90 $t --gtest_filter='*AttentionPrefill*' > "$out/gpu_tests_${v}_attention.log" 2>&1; rc=$?; echo "$v attention tests rc=$rc"
  grep -E "attention prefill.*D=256|Failure|FAILED|PASSED" "$out/gpu_tests_${v}_attention.log" | tail -8
  [ $rc = 0 ] || continue
  timeout 150 $t --gtest_filter='*Golden*:*Prefill*' > "$out/gpu_tests_$v.log" 2>&1; rc=$?; echo "$v golden/prefill tests rc=$rc"
  grep -E "golden-cuda.*(long|nvfp4|qsa)|FAILED|PASSED" "$out/gpu_tests_$v.log" | tail -5
  timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 $t --gtest_filter='*AttentionPrefill*Small*' > "$out/memcheck_$v.log" 2>&1
  mc=$?; echo "$v memcheck rc=$mc"; grep -E "ERROR SUMMARY" "$out/memcheck_$v.log"
  [ $rc = 0 ] && [ $mc = 0 ] && { variants="$variants $v"; tl="$tl $v"; }
done
VARIANTS="$variants" TL_VARIANTS="$tl" TL_PATTERN="^(attention_prefill|steps)" \
  AB_ARGS="--pp 4096,16384 --tg 1 --context 1 --runs 5" bash bench/tools/variants_visit.sh
