#!/usr/bin/env bash
# Session 27, visit 7 (last): the QSA decode selection on a cluster of 8 blocks (cl = head29 + that change; one
# block took 12.8 us at 32K under Nsight Compute, visit 6), and the remaining figures of head29 (= the committed
# tree's code, 36c2680 / abac560).
#   1. every GPU test on cl; memcheck on the QSA tests;
#   2. head29 and cl: pp 512 / 16384 and tg 128 at 1K (one run of 5 each);
#   3. the A/B head29 vs cl: pp 4096 and tg 128 at 32K, two rounds (variants_visit.sh, last: it packs $OUT).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
timeout 300 build/exp/imp_gpu_tests_cl > "$out/gpu_tests_cl.log" 2>&1; rc=$?; echo "cl gpu tests rc=$rc"
grep -E "golden-cuda|FAILED|PASSED|tests ran" "$out/gpu_tests_cl.log" | tail -14
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_cl \
  --gtest_filter='*GpuQsa*:-*At32k*:*BeyondTheCluster*' > "$out/memcheck_cl.log" 2>&1
echo "cl memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$out/memcheck_cl.log" | tail -3
variants="head29"; [ $rc = 0 ] && variants="head29 cl"
for v in $variants; do
  IMP_COMMIT="$(cat build/exp/imp_$v.label)" timeout 150 build/exp/imp_$v bench --dummy bench/configs/qwen3.8-flash-next.json \
    --backend cuda --pp 512,16384 --tg 128 --context 1024 --runs 5 --out "$out/rest_$v.json" > /dev/null 2> "$out/rest_$v.log"
  echo "$v rest rc=$?: $(grep -E '(pp|tg|roofline)' "$out/rest_$v.log" | cut -c12-120 | tr '\n' ' ')"
done
VARIANTS="$variants" TL_VARIANTS="" AB_ARGS="--pp 4096 --tg 128 --context 32768 --runs 5" bash bench/tools/variants_visit.sh
