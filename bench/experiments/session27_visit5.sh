#!/usr/bin/env bash
# Session 27, visit 5: the QSA decode selection with each thread's run of blocks as order keys in registers and
# the radix passes starting at the highest bit where two bounds of the threshold differ (reg = head29 + that
# change). Visit 4 measured head29's select kernel at 14.4 us in isolation at 32K (one SM, latency-bound).
#   1. every GPU test on reg; memcheck on the QSA tests;
#   2. Nsight Compute on reg's select kernel (4-layer slice, 32K context; head29 there: 14.4 / 14.6 us);
#   3. the A/B head29 vs reg: pp 4096 and tg 128 at 32K, two rounds (variants_visit.sh, last: it packs $OUT).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
timeout 300 build/exp/imp_gpu_tests_reg > "$out/gpu_tests_reg.log" 2>&1; echo "reg gpu tests rc=$?"
grep -E "golden-cuda|FAILED|PASSED|tests ran" "$out/gpu_tests_reg.log" | tail -14
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_reg \
  --gtest_filter='*GpuQsa*:-*At32k*:*BeyondRegisters*' > "$out/memcheck_reg.log" 2>&1
echo "reg memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$out/memcheck_reg.log" | tail -3
timeout 150 ncu --section SpeedOfLight --section WarpStateStats --section LaunchStats --section Occupancy \
  --clock-control none --cache-control none -k "regex:qsa_select" --launch-skip 2 --launch-count 2 \
  build/exp/imp_reg bench --dummy bench/configs/flash-next-4layers.json --backend cuda --pp 1 --tg 8 \
  --context 32768 --runs 1 > "$out/ncu_select_reg.txt" 2>&1
echo "reg ncu rc=$?"; grep -E "qsa_select|Duration|Warp Cycles Per Issued|Registers Per" "$out/ncu_select_reg.txt" | head -10
VARIANTS="head29 reg" TL_VARIANTS="" AB_ARGS="--pp 4096 --tg 128 --context 32768 --runs 5" bash bench/tools/variants_visit.sh
