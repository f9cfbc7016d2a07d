#!/usr/bin/env bash
# Session 25, visit 3: visit 2 again after its hang (the narrow tiles' consumers asked setmaxnreg for more registers
# than the producer warpgroup gave back to the block's pool; now checked by a static_assert), each step under a
# timeout, one A/B round.
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
t=build/exp/imp_gpu_tests_prod
timeout 60 $t --gtest_filter='*MoePrefill*Tiny*' > "$out/gpu_tests_prod_tiny.log" 2>&1; rc=$?; echo "tiny rc=$rc"
grep -E "OK|FAILED|PASSED" "$out/gpu_tests_prod_tiny.log" | tail -4
[ $rc = 0 ] || { tail -5 "$out/gpu_tests_prod_tiny.log"; exit 1; }
timeout 120 $t --gtest_filter='*MoePrefill*:*Golden*:*Prefill*' > "$out/gpu_tests_prod.log" 2>&1; echo "tests rc=$?"
grep -E "golden-cuda.*(nvfp4|long_sparse)|FAILED|PASSED" "$out/gpu_tests_prod.log" | tail -6
timeout 90 build/exp/imp_gpu_tests_prod8 --gtest_filter='*MoePrefill*' > "$out/gpu_tests_prod8.log" 2>&1; echo "prod8 tests rc=$?"
grep -E "FAILED|PASSED" "$out/gpu_tests_prod8.log" | tail -3
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 $t --gtest_filter='*MoePrefill*Tiny*' > "$out/memcheck_prod.log" 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY" "$out/memcheck_prod.log"
for v in head25 prod prod8; do
  timeout 100 build/exp/imp_$v bench --dummy bench/configs/qwen3.8-flash-next.json --backend cuda --pp 512,4096,16384 --tg 1 \
    --context 1 --runs 5 --out "$out/${v}_1.json" > /dev/null 2> "$out/${v}_1.log"
  echo "$v rc=$?: $(grep -E 'pp ' "$out/${v}_1.log" | cut -c12-70 | tr '\n' ' ')"
done
tar -czf /tmp/v3.tar.gz -C "$out" . && find "$out" -maxdepth 1 -type f -delete && mv /tmp/v3.tar.gz "$out/visit_outputs.tar.gz"
