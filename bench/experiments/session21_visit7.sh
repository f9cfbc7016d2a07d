#!/usr/bin/env bash
# Session 21, visit 7: a CUPTI decode timeline at context 32768 (eb1dd79's kernels; half-layer segments), for the
# 32K bar (250 tok/s). Carry build/carry.tar.xz (build/exp/imp_head, build/exp/libkernel_timeline.so, build/exp/lib,
# build/cuda/bin/lib).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$PWD/build/exp/lib" CUDA_INJECTION64_PATH="$PWD/build/exp/libkernel_timeline.so" \
  IMP_TIMELINE="$out/tl.csv" build/exp/imp_head bench --dummy bench/configs/qwen3.8-flash-next.json --backend cuda \
  --pp 1 --tg 24 --context 32768 --runs 1 --out "$out/tl_32k.json" > /dev/null 2> "$out/tl_32k.log"
echo "rc=$?"; grep -E "tg " "$out/tl_32k.log"
python3 bench/tools/timeline_summary.py "$out/tl.csv" --steps 16 --detail 0 --segments > "$out/timeline_32k.txt" 2>&1
cat "$out/timeline_32k.txt"; rm -f "$out/tl.csv"
