#!/usr/bin/env bash
# Prepared in session 25 (compiled, not run: its device time was spent). The MoE prefill GEMMs as persistent blocks
# on the producer warpgroup ("pers", session25_moe_prefill_persistent_producer.patch: as many blocks as the SMs
# hold, each walking its items in ascending wgmma width through one ring of stages, the next item's first chunks
# loaded during the current item's tail and epilogue; down's route weights sorted by the scatter kernel and loaded
# at the item's start), and the same with gate/up's activations gathered from x by the producer warpgroup's
# cp.async instead of the gather kernel ("persg", + session25_moe_prefill_producer_gathers_x.patch), against the
# tree ("head26", 0b9e308 = ecdcb23's kernels). Each variant's tiny MoE prefill tests first under a timeout (a
# hang shows as rc 124 and drops the variant), then its MoE prefill, prefill and golden tests, memcheck of the
# tiny tests, the A/B in two rounds and timelines. First, in seconds, bench/experiments/wgmma_mn_major_probe.cu.
# Build here (session 25 left them built at 0b9e308, packed in build/carry.tar.xz): bench/tools/build_variant.sh - head26;
# ... session25_moe_prefill_persistent_producer.patch pers;
# ... session25_moe_prefill_persistent_producer.patch+bench/experiments/session25_moe_prefill_producer_gathers_x.patch
# persg. Carry build/carry.tar.xz (build/exp/imp_{head26,pers,persg} with their .label files, imp_gpu_tests_{pers,persg},
# build/cuda/bin/lib, build/exp/lib, build/exp/libkernel_timeline.so, build/exp/wgmma_mn_major_probe).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
echo "== wgmma with B MN-major (what a wgmma flash attention's O = P V needs; bench/experiments/wgmma_mn_major_probe.cu)"
timeout 30 build/exp/wgmma_mn_major_probe > "$out/wgmma_mn_major_probe.txt" 2>&1; echo "probe rc=$?"; cat "$out/wgmma_mn_major_probe.txt"
variants="head26"
for v in pers persg; do
  t=build/exp/imp_gpu_tests_$v
  timeout 60 $t --gtest_filter='*MoePrefill*Tiny*' > "$out/gpu_tests_${v}_tiny.log" 2>&1; rc=$?; echo "$v tiny rc=$rc"
  grep -E "OK|FAILED|PASSED" "$out/gpu_tests_${v}_tiny.log" | tail -3
  [ $rc = 0 ] || { tail -4 "$out/gpu_tests_${v}_tiny.log"; continue; }
  timeout 120 $t --gtest_filter='*MoePrefill*:*Golden*:*Prefill*' > "$out/gpu_tests_$v.log" 2>&1; rc=$?; echo "$v tests rc=$rc"
  grep -E "golden-cuda.*(nvfp4|long_sparse|many)|FAILED|PASSED" "$out/gpu_tests_$v.log" | tail -6
  timeout 60 compute-sanitizer --tool memcheck --error-exitcode 3 $t --gtest_filter='*MoePrefill*Tiny*' > "$out/memcheck_$v.log" 2>&1
  echo "$v memcheck rc=$?"; grep -E "ERROR SUMMARY" "$out/memcheck_$v.log"
  [ $rc = 0 ] && variants="$variants $v"
done
VARIANTS="$variants" AB_ARGS="--pp 512,4096,16384 --tg 1 --context 1 --runs 5" \
  bash bench/tools/variants_visit.sh  # packs everything in $OUT into visit_outputs.tar.gz
