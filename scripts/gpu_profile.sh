#!/usr/bin/env bash
# Per-kernel times of decode steps under Nsight Compute on a 4-layer slice of the full-scale shapes (3 GDN
# layers, 1 attention layer with QSA, PLE on layer 2): which kernels a decode token spends its time in.
# Expects build/cuda/bin (carried); writes $OUT/ncu_decode.txt.
set -uo pipefail
out=${OUT:-/tmp/imp_out}
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:${LD_LIBRARY_PATH:-}"
# Dummy fills and the warm-up run come first; profile the kernels of the timed decode steps.
ncu --print-summary per-kernel --launch-skip ${NCU_SKIP:-400} --launch-count ${NCU_COUNT:-300} \
  build/cuda/bin/imp bench --dummy bench/configs/flash-next-4layers.json --backend cuda --pp 1 --tg 4 \
  --context ${CONTEXT:-1024} --runs 1 > "$out/ncu_decode.txt" 2>&1
echo "ncu rc=$?"
grep -E "^  [a-z_]+.*\(|Duration|Invocations" "$out/ncu_decode.txt" | head -150
