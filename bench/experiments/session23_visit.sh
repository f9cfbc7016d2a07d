#!/usr/bin/env bash
# Prepared in session 22 (not run: no device time left). Nsight Compute puts the MoE prefill gate/up GEMM at 2 warps
# per scheduler with 0.42 eligible, tensor pipe 36.6%, issue 30% (2026-12-01_ncu_prefill_moe_gate_up_6dfaf9f.txt):
# latency-bound at its occupancy. pipe = session23_moe_prefill_decode_next_chunk.patch: a software pipeline over
# chunks, each chunk's four k16 groups issued back to back, then (once the previous chunk's groups are done,
# wgmma_wait<4>) the barrier for the next chunk's copies and the next chunk's eight fragment decodes while this
# chunk's groups run (two fragment buffers: 226 registers wide, 128 narrow, no spill, no serialization warning).
# The stage refilled after the barrier of step st is chunk st - 1's (its groups are done), so the stage count
# and the copy schedule stay as they are. If it wins, update the k-loop comment in moe_prefill.cu.
# rank4 = session23_router_four_counts.patch: the decode router (one warp's serial chain of ~850 instructions, ~2.1 us
# per layer at the head of gate/up) counts its ranks in four partial sums instead of one chain of dependent adds
# (the 32 lane maxima, then each candidate against all); the same integers, so the same choices bit for bit.
# brouter = session23_block_router.patch: for 129-512 experts (the released 512) every warp of a gate/up block routes:
# warp w keeps its keys above the k-th largest of its lanes' maxima (2 keys per lane), then warp 0 repeats the bound
# over the kept keys and ranks the rest (a Python emulation of the algorithm matched the reference order on 3000
# random, tied and all-equal logit rows, E 129-512, k 1-16: session23_block_router_emulation.py). It includes the
# four partial counts for its own ranks. If it is kept, warp_router and block_router should share the candidate
# ranking loop (the patch writes it twice).
# all = the three patches (every GPU test and memcheck run on it).
# Build here first:
#   bench/tools/build_variant.sh - head
#   bench/tools/build_variant.sh bench/experiments/session23_moe_prefill_decode_next_chunk.patch pipe
#   bench/tools/build_variant.sh bench/experiments/session23_router_four_counts.patch rank4
#   bench/tools/build_variant.sh bench/experiments/session23_block_router.patch brouter
#   bench/tools/build_variant.sh bench/experiments/session23_moe_prefill_decode_next_chunk.patch+bench/experiments/session23_router_four_counts.patch+bench/experiments/session23_block_router.patch all
# Carry build/carry.tar.xz (build/exp/imp_{head,pipe,rank4,brouter}, build/exp/imp_gpu_tests_all, build/cuda/bin/lib).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
build/exp/imp_gpu_tests_all > "$out/gpu_tests_all.log" 2>&1
echo "tests all rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$out/gpu_tests_all.log" | tr '\n' ' ')"
grep -E "^\[  FAILED" "$out/gpu_tests_all.log" | head
timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_all \
  --gtest_filter='*Golden*/nvfp4:*Golden*/many_experts:*MoePrefill*Tiny*:*MoeDecodeFused*:*Router*' > "$out/memcheck_all.log" 2>&1
echo "memcheck all rc=$?: $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED)' "$out/memcheck_all.log" | tr '\n' ' ')"
VARIANTS="head pipe rank4 brouter" AB_ARGS="--pp 4096 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= bash bench/tools/variants_visit.sh
