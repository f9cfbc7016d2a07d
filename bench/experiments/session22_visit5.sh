#!/usr/bin/env bash
# Session 22, visit 5: the MoE prefill GEMM's wgmma pipeline one group deep (wgmma_wait<1>, head3 = 213e1fd, the
# code of 6dfaf9f) against two and three groups in flight (wg2, wg3: session22_moe_prefill_wgmma_wait{2,3}.patch;
# the A registers of those groups stay live, 198 / 202 registers, no serialization warning). Then, for the next
# session's plan, Nsight Compute of the prefill gate/up GEMM and of the decode MoE kernels (stall reasons, pipes,
# instruction mix) and the SASS of the decode gate/up and down kernels.
# Build here first: bench/tools/build_variant.sh - head3; ... session22_moe_prefill_wgmma_wait2.patch wg2; ...3.patch wg3
# Carry build/carry.tar.xz (build/exp/imp_{head3,wg2,wg3}, build/exp/imp_gpu_tests_wg3, build/cuda/bin/lib).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
build/exp/imp_gpu_tests_wg3 --gtest_filter='*MoePrefill*:*Golden*:*Prefill*' > "$out/gpu_tests_wg3.log" 2>&1
echo "tests wg3 rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$out/gpu_tests_wg3.log" | tr '\n' ' ')"
grep -E "^\[  FAILED" "$out/gpu_tests_wg3.log" | head
sections="--section SpeedOfLight --section WarpStateStats --section ComputeWorkloadAnalysis --section InstructionStats --section Occupancy --section SchedulerStats"
timeout 150 ncu $sections --clock-control none -k regex:moe_gate_up_kernel --launch-count 2 build/exp/imp_head3 bench \
  --dummy bench/configs/flash-next-4layers.json --backend cuda --pp 4096 --tg 1 --context 1 --runs 1 > "$out/ncu_prefill_gate_up.txt" 2>&1
echo "ncu prefill rc=$?"
timeout 150 ncu $sections --clock-control none -k regex:moe_decode --launch-skip 16 --launch-count 4 build/exp/imp_head3 bench \
  --dummy bench/configs/flash-next-4layers.json --backend cuda --pp 1 --tg 8 --context 1024 --runs 1 > "$out/ncu_decode_moe.txt" 2>&1
echo "ncu decode rc=$?"
cuobjdump -sass build/exp/imp_head3 2>/dev/null | awk '/Function : .*moe_decode_(gate_up_kernelILi16|down_hc_write)/{p=1} /Function : /{if ($0 !~ /moe_decode_(gate_up_kernelILi16|down_hc_write)/) p=0} p' > "$out/sass_moe_decode.txt"
echo "sass lines: $(wc -l < "$out/sass_moe_decode.txt")"
VARIANTS="head3 wg2 wg3" AB_ARGS="--pp 512,4096 --tg 1 --context 1 --runs 5" TL_VARIANTS= bash bench/tools/variants_visit.sh
