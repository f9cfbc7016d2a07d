#!/usr/bin/env bash
# Per-kernel times under Nsight Compute on a 4-layer slice of the full-scale shapes (3 GDN layers, 1 attention
# layer with QSA, PLE on layer 2): which kernels a decode token (and, with PREFILL=N, a prompt chunk of N tokens)
# spends its time in. At the GPU's own clocks with warm caches, as in the decode graph; one metric, the duration
# (one pass: a full section set saved and restored memory per kernel, seconds each with the 4 GiB mapped PLE
# table). Expects build/cuda/bin (carried); writes $OUT/ncu_decode.txt (and ncu_prefill.txt). DETAIL=REGEX adds
# stall reasons and throughput of the matching decode kernels (ncu_detail.txt), PREFILL_DETAIL=REGEX the same for
# the first matching launches of a 4096-token prefill chunk (ncu_prefill_detail.txt); PREFILL= and NCU_DECODE=0
# select.
set -uo pipefail
out=${OUT:-/tmp/imp_out}
mkdir -p "$out"
# cuBLAS from the toolkit on the machine (lib or lib64, whichever it has).
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
# Dummy fills and the warm-up run come first; profile the kernels of the timed decode steps.
if [ "${NCU_DECODE:-1}" = 1 ]; then
ncu --metrics gpu__time_duration.sum --clock-control none --cache-control none --print-summary per-kernel --launch-skip ${NCU_SKIP:-400} --launch-count ${NCU_COUNT:-300} \
  build/cuda/bin/imp bench --dummy bench/configs/flash-next-4layers.json --backend cuda --pp 1 --tg 4 \
  --context ${CONTEXT:-1024} --runs 1 > "$out/ncu_decode.txt" 2>&1
echo "ncu decode rc=$?"
fi
if [ -n "${PREFILL:-}" ]; then
  # Everything of one run (fills, warm-up and timed prefill): the per-kernel averages are what matter.
  ncu --metrics gpu__time_duration.sum --clock-control none --cache-control none --print-summary per-kernel build/cuda/bin/imp bench --dummy bench/configs/flash-next-4layers.json \
    --backend cuda --pp "$PREFILL" --tg 1 --context 1 --runs 1 > "$out/ncu_prefill.txt" 2>&1
  echo "ncu prefill rc=$?"
fi
if [ -n "${DETAIL:-}" ]; then
  # Why a few decode kernels take their time (stall reasons, throughput, occupancy): the kernels matching the
  # DETAIL regex in one decode step of the slice (31 matching launches per step with the default regex).
  ncu --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats \
    --clock-control none --cache-control none -k "regex:${DETAIL}" --launch-skip ${DETAIL_SKIP:-93} \
    --launch-count ${DETAIL_COUNT:-31} build/cuda/bin/imp bench --dummy bench/configs/flash-next-4layers.json \
    --backend cuda --pp 1 --tg 8 --context 1024 --runs 1 > "$out/ncu_detail.txt" 2>&1
  echo "ncu detail rc=$?"
fi
if [ -n "${PREFILL_DETAIL:-}" ]; then
  ncu --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats \
    --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --clock-control none --cache-control none \
    -k "regex:${PREFILL_DETAIL}" --launch-count ${PREFILL_DETAIL_COUNT:-4} build/cuda/bin/imp bench --dummy \
    bench/configs/flash-next-4layers.json --backend cuda --pp 4096 --tg 1 --context 1 --runs 1 \
    > "$out/ncu_prefill_detail.txt" 2>&1
  echo "ncu prefill detail rc=$?"
fi
