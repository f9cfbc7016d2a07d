#!/usr/bin/env bash
# Prepared in session 25 (compiled, not run: its device time was spent). The MoE prefill GEMMs as persistent blocks
# on the producer warpgroup ("pers", session25_moe_prefill_persistent_producer.patch: as many blocks as the SMs
# hold, each walking items in ascending wgmma width through one ring of stages, the next item's first chunks
# loaded during the current item's tail and epilogue; down's route weights sorted by the scatter kernel, loaded at
# the item's start) against the tree ("head26", b8686a5 = ecdcb23's kernels). pers's MoE prefill, prefill and
# golden tests and memcheck of the tiny MoE prefill tests (a hang would show as rc 124), then the A/B in two rounds
# and timelines of both.
# Build here: bench/tools/build_variant.sh - head26; bench/tools/build_variant.sh
# bench/experiments/session25_moe_prefill_persistent_producer.patch pers. Carry build/carry.tar.xz
# (build/exp/imp_{head26,pers}, imp_gpu_tests_pers, build/cuda/bin/lib, build/exp/lib, libkernel_timeline.so).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
t=build/exp/imp_gpu_tests_pers
timeout 60 $t --gtest_filter='*MoePrefill*Tiny*' > "$out/gpu_tests_pers_tiny.log" 2>&1; rc=$?; echo "tiny rc=$rc"
grep -E "OK|FAILED|PASSED" "$out/gpu_tests_pers_tiny.log" | tail -4
[ $rc = 0 ] || { tail -5 "$out/gpu_tests_pers_tiny.log"; exit 1; }
timeout 150 $t --gtest_filter='*MoePrefill*:*Golden*:*Prefill*' > "$out/gpu_tests_pers.log" 2>&1; echo "tests rc=$?"
grep -E "golden-cuda|FAILED|PASSED" "$out/gpu_tests_pers.log" | tail -12
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 $t --gtest_filter='*MoePrefill*Tiny*' > "$out/memcheck_pers.log" 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY" "$out/memcheck_pers.log"
VARIANTS="head26 pers" AB_ARGS="--pp 512,4096,16384 --tg 1 --context 1 --runs 5" \
  bash bench/tools/variants_visit.sh  # packs everything in $OUT into visit_outputs.tar.gz
