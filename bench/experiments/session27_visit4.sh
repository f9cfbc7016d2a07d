#!/usr/bin/env bash
# Session 27, visit 4: why the QSA decode selection takes ~12-14 us per layer at 32K context, and the histogram's
# warp-aggregated adds alone (agg = head29 + session27_qsa_histogram_warp_adds.patch; qsa = head29 + the keys
# staged in shared memory as well, visit 3: decode at 32K -0.5%, pp 4096 +0.5%).
#   1. Nsight Compute on the select kernel of the 4-layer slice at 32K context: head29, qsa, agg (duration, stall
#      reasons, launch statistics; kernels run one at a time there, so this is the kernel's own time);
#   2. agg's QSA and golden tests;
#   3. the A/B head29 vs agg: pp 4096 and tg 128 at 32K, two rounds (variants_visit.sh, last: it packs $OUT).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
for v in head29 qsa agg; do
  timeout 150 ncu --section SpeedOfLight --section WarpStateStats --section LaunchStats --section Occupancy \
    --clock-control none --cache-control none -k "regex:qsa_select_kernel" --launch-skip 2 --launch-count 2 \
    build/exp/imp_$v bench --dummy bench/configs/flash-next-4layers.json --backend cuda --pp 1 --tg 8 \
    --context 32768 --runs 1 > "$out/ncu_select_$v.txt" 2>&1
  echo "$v ncu rc=$?"; grep -E "Duration|Stall|Warp Cycles Per Issued|Achieved Occupancy|Registers Per|Shared Memory Config" "$out/ncu_select_$v.txt" | head -14
done
timeout 120 build/exp/imp_gpu_tests_agg --gtest_filter='*GpuQsa*:*Golden*' > "$out/gpu_tests_agg.log" 2>&1
echo "agg qsa+golden tests rc=$?"; grep -E "FAILED|PASSED|golden-cuda.*(qsa|long)" "$out/gpu_tests_agg.log" | tail -5
VARIANTS="head29 agg" TL_VARIANTS="" AB_ARGS="--pp 4096 --tg 128 --context 32768 --runs 5" bash bench/tools/variants_visit.sh
