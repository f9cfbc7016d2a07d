#!/usr/bin/env bash
# Session 21, visit 5: where does the largest shared-memory carveout cost decode (carve: -3.7% in visit 1), and
# does one L1/shared split for the MoE's two kernels alone pay (cmoe = session21_carveout_max_shared_moe.patch)?
# A/B head / carve / cmoe, then a CUPTI decode timeline of head and carve (half-layer segments).
# Build here first: build/exp/imp_{head,carve} (visit 1), bench/tools/build_variant.sh PATCH cmoe.
# Carry build/carry.tar.xz (build/exp/imp_{head,carve,cmoe}, build/exp/libkernel_timeline.so, build/exp/lib,
# build/cuda/bin/lib).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
for v in head carve; do
  LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$PWD/build/exp/lib" CUDA_INJECTION64_PATH="$PWD/build/exp/libkernel_timeline.so" \
    IMP_TIMELINE="$out/tl.csv" build/exp/imp_$v bench --dummy bench/configs/qwen3.8-flash-next.json --backend cuda \
    --pp 1 --tg 24 --context 1024 --runs 1 --out "$out/tl_$v.json" > /dev/null 2> "$out/tl_$v.log"
  python3 bench/tools/timeline_summary.py "$out/tl.csv" --steps 16 --detail 0 --segments > "$out/timeline_$v.txt" 2>&1
  echo "== timeline $v"; head -40 "$out/timeline_$v.txt"; rm -f "$out/tl.csv"
done
VARIANTS="head carve cmoe" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= bash bench/tools/variants_visit.sh
