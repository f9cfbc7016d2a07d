#!/usr/bin/env bash
# Prepared in session 23 (not run: no device time left). Session 23 found the MoE prefill gate/up GEMM's time
# following its weight chunks, not its MMAs (N 96 -> 80: -1.5% time for -17% MMAs), its warps (four warpgroups: not
# faster) or where its copies are issued (2026-12-01_session23_ab.txt). Four variants, one visit:
# - l2probe = session24_probe_moe_prefill_weights_in_l2.patch (a probe, wrong results: every tile reads slot 0 or 1,
#   so the weights come from L2): if gate/up and down get much faster, the GEMM waits for its weights' DRAM reads
#   (then: deeper or larger weight prefetches, a chunk-major weight layout for whole-stage bulk copies); if not,
#   its per-chunk work and synchronization set the time.
# - pair2 = session24_moe_prefill_two_chunks_per_barrier.patch: one block barrier (and copy wait and proxy fence)
#   per two 64-input chunks instead of one (stages refilled three chunks behind instead of two; 206 registers, no
#   spill). If it wins, delete Stages::kAhead and update the k-loop comment.
# - down2 = session24_moe_prefill_down_two_row_blocks.patch: each down block computes two row blocks of 256 one after
#   the other in one copy stream (the second's first chunks in flight while the first ends; partials stored straight
#   from the accumulators; 250 registers, no spill): half the down blocks pay the fill (~4.3 us a block, session
#   23's timeline fit; down runs 10 chunks a block). Its timeline's moe_down_kernel is the figure to compare.
# - grid = session24_moe_prefill_grid_per_tile_shape.patch: both GEMMs' grid rows from the wide tiles' bound (832 at
#   pp 4096) instead of the narrow tiles' (1792): the rows past the plan's ~525 tiles are blocks that reserve an SM's
#   150 KB of shared memory only to exit (8960 gate/up and 17920 down blocks per layer at pp 4096, ~2625 and ~5250
#   of them working). A sure change if it is not slower: land it whatever the others do.
# Build here first (f507bfb or later, committed tree):
#   bench/tools/build_variant.sh - head24
#   bench/tools/build_variant.sh bench/experiments/session24_moe_prefill_two_chunks_per_barrier.patch pair2
#   bench/tools/build_variant.sh bench/experiments/session24_probe_moe_prefill_weights_in_l2.patch l2probe
#   bench/tools/build_variant.sh bench/experiments/session24_moe_prefill_down_two_row_blocks.patch down2
#   bench/tools/build_variant.sh bench/experiments/session24_moe_prefill_grid_per_tile_shape.patch grid
# Carry build/carry.tar.xz (build/exp/imp_{head24,pair2,l2probe,down2,grid}, build/exp/imp_gpu_tests_{pair2,down2,grid},
# build/cuda/bin/lib, build/exp/lib, build/exp/libkernel_timeline.so).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
for v in pair2 down2 grid; do
  build/exp/imp_gpu_tests_$v --gtest_filter='*MoePrefill*:*Golden*:*Prefill*' > "$out/gpu_tests_$v.log" 2>&1
  echo "tests $v rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$out/gpu_tests_$v.log" | tr '\n' ' ')"
  grep -E "^\[  FAILED" "$out/gpu_tests_$v.log" | head -5
  timeout 100 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_$v \
    --gtest_filter='*MoePrefill*Tiny*:*Golden*/nvfp4' > "$out/memcheck_$v.log" 2>&1
  echo "memcheck $v rc=$?: $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED)' "$out/memcheck_$v.log" | tr '\n' ' ')"
done
VARIANTS="head24 pair2 l2probe down2 grid" AB_ARGS="--pp 512,4096,16384 --tg 1 --context 1 --runs 5" TL_VARIANTS="head24 l2probe down2 grid" \
  bash bench/tools/variants_visit.sh
