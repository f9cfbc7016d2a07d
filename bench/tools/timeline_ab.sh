#!/usr/bin/env bash
# A/B of decode variants on the GPU machine in one visit: for each spec NAME[:VAR=VALUE,...], a CUPTI kernel
# timeline of full-scale decode steps (kernel_timeline.cpp, carried in build/exp) with those environment
# variables set. Writes $OUT/timeline_NAME.csv and .log; summarise here with timeline_summary.py.
# Usage: bench/tools/timeline_ab.sh base hc1:IMP_EXP_HC_GROUP=1 ...
set -uo pipefail
out=${OUT:-/tmp/imp_out}
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:$PWD/build/exp/lib:${LD_LIBRARY_PATH:-}"
for spec in "$@"; do
  name=${spec%%:*}
  vars=()
  [ "$spec" != "$name" ] && IFS=, read -ra vars <<< "${spec#*:}"
  env "${vars[@]}" CUDA_INJECTION64_PATH="$PWD/build/exp/libkernel_timeline.so" IMP_TIMELINE="$out/timeline_$name.csv" \
    build/cuda/bin/imp bench --dummy bench/configs/qwen3.8-flash-next.json --backend cuda --pp 1 --tg 24 \
    --context ${TIMELINE_CONTEXT:-1024} --runs 1 > /dev/null 2> "$out/timeline_$name.log"
  echo "$name rc=$? $(grep -E 'tg ' "$out/timeline_$name.log" | sed 's/.*://')"
done
