#!/usr/bin/env bash
# Prepared in session 23 (not run: no device time left). Session 23 found the MoE prefill gate/up GEMM's time
# following its weight chunks, not its MMAs (N 96 -> 80: -1.5% time for -17% MMAs), its warps (four warpgroups: not
# faster) or where its copies are issued (2026-12-01_session23_ab.txt). Two questions, one visit:
# - l2probe = session24_probe_moe_prefill_weights_in_l2.patch (a probe, wrong results: every tile reads slot 0 or 1,
#   so the weights come from L2): if gate/up and down get much faster, the GEMM waits for its weights' DRAM reads
#   (then: deeper or larger weight prefetches, a chunk-major weight layout for whole-stage bulk copies); if not,
#   its per-chunk work and synchronization set the time.
# - pair2 = session24_moe_prefill_two_chunks_per_barrier.patch: one block barrier (and copy wait and proxy fence)
#   per two 64-input chunks instead of one (stages refilled three chunks behind instead of two; 206 registers, no
#   spill). If it wins, delete Stages::kAhead and update the k-loop comment.
# Build here first (f507bfb or later, committed tree):
#   bench/tools/build_variant.sh - head24
#   bench/tools/build_variant.sh bench/experiments/session24_moe_prefill_two_chunks_per_barrier.patch pair2
#   bench/tools/build_variant.sh bench/experiments/session24_probe_moe_prefill_weights_in_l2.patch l2probe
# Carry build/carry.tar.xz (build/exp/imp_{head24,pair2,l2probe}, build/exp/imp_gpu_tests_pair2, build/cuda/bin/lib,
# build/exp/lib, build/exp/libkernel_timeline.so).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
build/exp/imp_gpu_tests_pair2 --gtest_filter='*MoePrefill*:*Golden*:*Prefill*' > "$out/gpu_tests_pair2.log" 2>&1
echo "tests pair2 rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$out/gpu_tests_pair2.log" | tr '\n' ' ')"
grep -E "^\[  FAILED" "$out/gpu_tests_pair2.log" | head -5
timeout 100 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_pair2 \
  --gtest_filter='*MoePrefill*Tiny*:*Golden*/nvfp4' > "$out/memcheck_pair2.log" 2>&1
echo "memcheck pair2 rc=$?: $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED)' "$out/memcheck_pair2.log" | tr '\n' ' ')"
VARIANTS="head24 pair2 l2probe" AB_ARGS="--pp 512,4096,16384 --tg 1 --context 1 --runs 5" TL_VARIANTS="head24 pair2 l2probe" \
  bash bench/tools/variants_visit.sh
