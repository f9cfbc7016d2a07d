#!/usr/bin/env bash
# Prepared in session 25 (compiled, not run). The prefill flash attention at D = 256 on bf16 pages on wgmma with a
# producer warpgroup ("fa", session25_attention_prefill_wgmma.patch), and the same with tile i's P V overlapping
# tile i + 1's softmax and K and V on separate barriers ("fa2", session25_attention_prefill_wgmma_overlap.patch,
# which includes fa), against the tree
# ("head26"). The MN-major wgmma probe first (the layout O = P V assumes: kVOffsetsSwapped = false must match its
# "match:" line, else flip it in both patches before anything else); per variant its attention prefill tests
# under a timeout (a failure drops the variant), its golden and prefill tests, memcheck of the attention prefill
# tests; then the A/B in two rounds at pp 4096 and 16384 and the timelines (attention_prefill_wgmma_kernel against
# attention_prefill_kernel: 17.6 ms per 4096-token chunk at head25).
# Build here: bench/tools/build_variant.sh - head26; bench/tools/build_variant.sh PATCH fa (fa2). Carry
# build/carry.tar.xz (build/exp/imp_{head26,fa,fa2} with their .label files, imp_gpu_tests_{fa,fa2},
# build/exp/wgmma_mn_major_probe, build/cuda/bin/lib, build/exp/lib, build/exp/libkernel_timeline.so).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
timeout 30 build/exp/wgmma_mn_major_probe > "$out/wgmma_mn_major_probe.txt" 2>&1; echo "probe rc=$?"; cat "$out/wgmma_mn_major_probe.txt"
variants="head26"
for v in fa fa2; do
  t=build/exp/imp_gpu_tests_$v
  timeout 90 $t --gtest_filter='*AttentionPrefill*' > "$out/gpu_tests_${v}_attention.log" 2>&1; rc=$?; echo "$v attention tests rc=$rc"
  grep -E "attention prefill|FAILED|PASSED" "$out/gpu_tests_${v}_attention.log" | tail -14
  [ $rc = 0 ] || continue
  timeout 120 $t --gtest_filter='*Golden*:*Prefill*' > "$out/gpu_tests_$v.log" 2>&1; rc=$?; echo "$v golden/prefill tests rc=$rc"
  grep -E "golden-cuda|FAILED|PASSED" "$out/gpu_tests_$v.log" | tail -10
  timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 $t --gtest_filter='*AttentionPrefill*' > "$out/memcheck_$v.log" 2>&1
  echo "$v memcheck rc=$?"; grep -E "ERROR SUMMARY" "$out/memcheck_$v.log"
  [ $rc = 0 ] && variants="$variants $v"
done
VARIANTS="$variants" TL_PATTERN="^(attention_prefill|steps)" AB_ARGS="--pp 4096,16384 --tg 1 --context 1 --runs 5" \
  bash bench/tools/variants_visit.sh  # packs everything in $OUT into visit_outputs.tar.gz
