#!/usr/bin/env bash
# Session 22, visit 4: the full validation of the tree (scripts/gpu_visit.sh with a 1K decode timeline and a prefill
# timeline), preceded by a 32K decode timeline with half-layer segments. Carry build/carry.tar.xz (build/cuda/bin/imp,
# build/cuda/tests/imp_gpu_tests, build/cuda/bin/lib, build/exp/libkernel_timeline.so, build/exp/lib, build/wheels).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$PWD/build/exp/lib" CUDA_INJECTION64_PATH="$PWD/build/exp/libkernel_timeline.so" \
  IMP_TIMELINE="$out/tl.csv" build/cuda/bin/imp bench --dummy bench/configs/qwen3.8-flash-next.json --backend cuda \
  --pp 1 --tg 24 --context 32768 --runs 1 --out "$out/tl_32k.json" > /dev/null 2> "$out/tl_32k.log"
echo "32K timeline rc=$?"; grep -E "tg " "$out/tl_32k.log"
python3 bench/tools/timeline_summary.py "$out/tl.csv" --steps 16 --detail 0 --segments > "$out/timeline_32k.txt" 2>&1
head -3 "$out/timeline_32k.txt"; rm -f "$out/tl.csv"
TIMELINE=1 TIMELINE_PREFILL=1 IMP_BENCH_ARGS="--pp 512,4096,16384 --tg 128,512 --context 1024,32768 --runs 5" \
  MEMCHECK_FILTER='*Golden*/ple_qsa:*Golden*/nvfp4:*Golden*/many_experts:*Golden*/long_sparse:*Ngram*:GpuAttentionKernel.*:GpuAttention.*:*MoeDecodeFused*' \
  bash scripts/gpu_visit.sh
