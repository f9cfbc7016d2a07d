#!/usr/bin/env bash
# Prepared in session 22 (not run: no device time left). Nsight Compute puts the MoE prefill gate/up GEMM at 2 warps
# per scheduler with 0.42 eligible, tensor pipe 36.6%, issue 30% (2026-12-01_ncu_prefill_moe_gate_up_6dfaf9f.txt):
# latency-bound at its occupancy. pipe = session23_moe_prefill_decode_next_chunk.patch: a software pipeline over
# chunks, each chunk's four k16 groups issued back to back, then (once the previous chunk's groups are done,
# wgmma_wait<4>) the barrier for the next chunk's copies and the next chunk's eight fragment decodes while this
# chunk's groups run (two fragment buffers: 226 registers wide, 128 narrow, no spill, no serialization warning).
# The stage refilled after the barrier of step st is chunk st - 1's (its groups are done), so the stage count
# and the copy schedule stay as they are. If it wins, update the k-loop comment in moe_prefill.cu.
# Build here first:
#   bench/tools/build_variant.sh - head
#   bench/tools/build_variant.sh bench/experiments/session23_moe_prefill_decode_next_chunk.patch pipe
# Carry build/carry.tar.xz (build/exp/imp_{head,pipe}, build/exp/imp_gpu_tests_pipe, build/cuda/bin/lib).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
build/exp/imp_gpu_tests_pipe --gtest_filter='*MoePrefill*:*Golden*:*Prefill*' > "$out/gpu_tests_pipe.log" 2>&1
echo "tests pipe rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$out/gpu_tests_pipe.log" | tr '\n' ' ')"
grep -E "^\[  FAILED" "$out/gpu_tests_pipe.log" | head
timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_pipe \
  --gtest_filter='*Golden*/nvfp4:*Golden*/many_experts:*MoePrefill*Tiny*' > "$out/memcheck_pipe.log" 2>&1
echo "memcheck pipe rc=$?: $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED)' "$out/memcheck_pipe.log" | tr '\n' ' ')"
VARIANTS="head pipe" AB_ARGS="--pp 512,4096,16384 --tg 1 --context 1 --runs 5" TL_VARIANTS= bash bench/tools/variants_visit.sh
