#!/usr/bin/env bash
# A/B of two builds in one GPU visit: the GPU tests matching TEST_FILTER with build B's test binary, then prefill
# at 4096 tokens (AB_ARGS to change) with A = build/exp/imp_a (a copy of the baseline build's imp, carried) and
# B = build/cuda/bin/imp, alternating A, B, A, B so that drift hits both; then a CUPTI prefill timeline of B
# (TIMELINE_PREFILL=0 skips it; needs build/exp/libkernel_timeline.so, see bench/tools/kernel_timeline.cpp).
# Everything goes into $OUT/visit_outputs.tar.gz (a visit returns only a few files).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
cfg=bench/configs/qwen3.8-flash-next.json
build/cuda/tests/imp_gpu_tests --gtest_filter="${TEST_FILTER:-*}" > "$out/gpu_tests.log" 2>&1; echo "tests rc=$?"
grep -E "golden-cuda|FAILED|PASSED|tests ran" "$out/gpu_tests.log" | tail -14
for i in 1 2; do
  for v in a b; do
    bin=build/exp/imp_a; [ $v = b ] && bin=build/cuda/bin/imp
    SECONDS=0
    $bin bench --dummy $cfg --backend cuda ${AB_ARGS:---pp 4096 --tg 1 --context 1 --runs 5} --out "$out/ab_${v}_$i.json" > /dev/null 2> "$out/ab_${v}_$i.log"
    echo "$v$i rc=$? ${SECONDS}s: $(grep -E '(pp|tg) ' "$out/ab_${v}_$i.log" | tr '\n' ' ' | cut -c1-300)"
  done
done
if [ "${TIMELINE_PREFILL:-1}" = 1 ]; then
  LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$PWD/build/exp/lib" CUDA_INJECTION64_PATH="$PWD/build/exp/libkernel_timeline.so" \
    IMP_TIMELINE="$out/timeline_prefill.csv" build/cuda/bin/imp bench --dummy $cfg --backend cuda \
    --pp 4096 --tg 1 --context 1 --runs 2 --out "$out/bench_timeline_prefill.json" > /dev/null 2> "$out/timeline_prefill.log"
  echo "prefill timeline rc=$?"
  python3 bench/tools/timeline_summary.py "$out/timeline_prefill.csv" --prefill --steps 1 --detail 90 > "$out/timeline_prefill_summary.txt" 2>&1
  head -40 "$out/timeline_prefill_summary.txt"; rm -f "$out/timeline_prefill.csv"
fi
archive=$(mktemp /tmp/visit_outputs.XXXXXX)
tar -czf "$archive" -C "$out" . && find "$out" -maxdepth 1 -type f -delete && mv "$archive" "$out/visit_outputs.tar.gz"
