#!/usr/bin/env bash
# Session 26, visit 3: the wgmma flash attention again ("fa", "fa2": session25_attention_prefill_wgmma*.patch on
# 024dda0) after visit 2's fault. Visit 2's probe and both variants hit an illegal address: V's descriptor had
# LBO = the MN core-matrix step (128 B) and SBO = the K step, so wgmma stepped the MN core matrices by D * 16 bytes,
# past the tile; the patches and the probe now take LBO = the K step, SBO = the MN step (CUTLASS's MN-major
# interleave form), and the probe gives every launch 64 KB so that the wrong assignment reads garbage, not past
# the buffer. Then as visit 2: per variant its attention prefill tests (a failure drops it), golden and prefill
# tests, memcheck of the small attention shapes; the A/B against head27 (= 024dda0) in two rounds at pp 4096 and
# 16384; timelines of the surviving variants.
# Build here: bench/tools/build_variant.sh - head27; ... session25_attention_prefill_wgmma.patch fa; ...
# session25_attention_prefill_wgmma_overlap.patch fa2; nvcc the probe (its header). Carry build/carry.tar.xz.
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
timeout 30 build/exp/wgmma_mn_major_probe > "$out/wgmma_mn_major_probe.txt" 2>&1; echo "probe rc=$?"; cat "$out/wgmma_mn_major_probe.txt"
variants="head27"; tl=""
for v in fa fa2; do
  t=build/exp/imp_gpu_tests_$v
  timeout 90 $t --gtest_filter='*AttentionPrefill*' > "$out/gpu_tests_${v}_attention.log" 2>&1; rc=$?; echo "$v attention tests rc=$rc"
  grep -E "attention prefill|Failure|FAILED|PASSED" "$out/gpu_tests_${v}_attention.log" | tail -14
  [ $rc = 0 ] || continue
  timeout 150 $t --gtest_filter='*Golden*:*Prefill*' > "$out/gpu_tests_$v.log" 2>&1; rc=$?; echo "$v golden/prefill tests rc=$rc"
  grep -E "golden-cuda|FAILED|PASSED" "$out/gpu_tests_$v.log" | tail -10
  timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 $t --gtest_filter='*AttentionPrefill*Small*' > "$out/memcheck_$v.log" 2>&1
  mc=$?; echo "$v memcheck rc=$mc"; grep -E "ERROR SUMMARY" "$out/memcheck_$v.log"
  [ $rc = 0 ] && [ $mc = 0 ] && { variants="$variants $v"; tl="$tl $v"; }
done
VARIANTS="$variants" TL_VARIANTS="$tl" TL_PATTERN="^(attention_prefill|steps)" \
  AB_ARGS="--pp 4096,16384 --tg 1 --context 1 --runs 5" bash bench/tools/variants_visit.sh
