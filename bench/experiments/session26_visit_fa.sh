#!/usr/bin/env bash
# Prepared in session 25 (compiled, not run). The prefill flash attention at D = 256 on bf16 pages on wgmma with a
# producer warpgroup ("fa", session25_attention_prefill_wgmma.patch) against the tree ("head26"): the MN-major
# wgmma probe first (the layout fa's O = P V assumes: kVOffsetsSwapped = false must match its "match:" line, else
# flip it before anything else), fa's attention prefill, prefill and golden tests under a timeout, memcheck of the
# attention prefill tests, then the A/B in two rounds and both timelines (attention_prefill_wgmma_kernel against
# attention_prefill_kernel; 17.6 ms per 4096-token chunk at head25).
# Build here: bench/tools/build_variant.sh - head26; bench/tools/build_variant.sh
# bench/experiments/session25_attention_prefill_wgmma.patch fa. Carry build/carry.tar.xz (build/exp/imp_{head26,fa}
# with their .label files, imp_gpu_tests_fa, build/exp/wgmma_mn_major_probe, build/cuda/bin/lib, build/exp/lib,
# build/exp/libkernel_timeline.so).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
timeout 30 build/exp/wgmma_mn_major_probe > "$out/wgmma_mn_major_probe.txt" 2>&1; echo "probe rc=$?"; cat "$out/wgmma_mn_major_probe.txt"
t=build/exp/imp_gpu_tests_fa
timeout 90 $t --gtest_filter='*AttentionPrefill*' > "$out/gpu_tests_fa_attention.log" 2>&1; rc=$?; echo "attention tests rc=$rc"
grep -E "attention prefill|OK|FAILED|PASSED" "$out/gpu_tests_fa_attention.log" | tail -14
[ $rc = 0 ] || exit 1
timeout 120 $t --gtest_filter='*Golden*:*Prefill*' > "$out/gpu_tests_fa.log" 2>&1; echo "golden/prefill tests rc=$?"
grep -E "golden-cuda|FAILED|PASSED" "$out/gpu_tests_fa.log" | tail -10
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 $t --gtest_filter='*AttentionPrefill*' > "$out/memcheck_fa.log" 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY" "$out/memcheck_fa.log"
VARIANTS="head26 fa" TL_PATTERN="^(attention_prefill|steps)" AB_ARGS="--pp 512,4096,16384 --tg 1 --context 1 --runs 5" \
  bash bench/tools/variants_visit.sh  # packs everything in $OUT into visit_outputs.tar.gz
