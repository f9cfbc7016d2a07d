#!/usr/bin/env bash
# Session 37, last visit: dg = the tree (kScoreBatch 4; the decode step captured as two graphs, within and beyond the
# QSA budget, the latter with the cluster selection on whole SMs): the whole GPU suite (GpuQsa alternates both
# placements), memcheck of the released-shape QSA case, and one A/B round against s36 at 1K / 32K.
# Run: `tar -xJf build/carry.tar.xz && timeout 200 bash bench/experiments/session37_visit6.sh`.
set -uo pipefail
R=$OUT/raw; mkdir -p $R
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
timeout 100 build/exp/imp_gpu_tests_dg > $R/gpu_tests_dg.log 2>&1; echo "gpu tests dg rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED|golden-cuda" $R/gpu_tests_dg.log | tail -12
for v in s36 dg; do
  IMP_COMMIT="$(cat build/exp/imp_$v.label)" timeout 60 build/exp/imp_$v bench --dummy bench/configs/qwen3.8-flash-next.json \
    --backend cuda --pp 1 --tg 128 --context 1024,32768 --runs 5 --out "$R/${v}_1.json" > /dev/null 2> "$R/${v}_1.log"
  echo "$v rc=$?: $(grep -E 'tg ' "$R/${v}_1.log" | cut -c12-90 | tr '\n' ' ')"
done
timeout 40 compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_dg \
  --gtest_filter='GpuQsa.SelectionMatchesCpuAtReleasedShapes' > $R/memcheck_dg.log 2>&1; echo "memcheck dg rc=$?"; tail -1 $R/memcheck_dg.log
tar -czf $OUT/raw.tar.gz -C $R . && rm -rf $R
