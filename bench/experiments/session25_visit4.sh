#!/usr/bin/env bash
# Session 25, visit 4: the committed producer warpgroup with eight wide stages (s25) against the head of the session
# (head25, 996d066): golden, prefill and MoE prefill GPU tests of s25, then a second A/B round.
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
timeout 100 build/exp/imp_gpu_tests_s25 --gtest_filter='*MoePrefill*:*Golden*:*Prefill*' > "$out/gpu_tests_s25.log" 2>&1
echo "tests rc=$?"; grep -E "golden-cuda|FAILED|PASSED" "$out/gpu_tests_s25.log" | tail -12
for v in s25 head25; do
  timeout 80 build/exp/imp_$v bench --dummy bench/configs/qwen3.8-flash-next.json --backend cuda --pp 512,4096,16384 --tg 1 \
    --context 1 --runs 5 --out "$out/${v}_2.json" > /dev/null 2> "$out/${v}_2.log"
  echo "$v rc=$?: $(grep -E 'pp ' "$out/${v}_2.log" | cut -c12-70 | tr '\n' ' ')"
done
