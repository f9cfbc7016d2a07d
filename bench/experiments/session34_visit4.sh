#!/usr/bin/env bash
# Session 34, visit 4: visit 3 found more loads per lane slower in the hc_write and gate GEMVs (3: -1%, 4: -7%), as
# session 10 found for every GEMV (8 / 6 / 4 / 3 / 2 loads per lane: 190.1 / 189.2 / 203.1 / 204.5 / 205.8); one was
# never measured.
# - hb1 (session34_hc_write_batch.patch with kHcWriteBatch = 1): the hc_write GEMV (the output projections) with 1 load per lane.
# - b1all (session34_gemv_batch_1.patch): kGemvBatch = 1 for every GEMV that uses the default.
# Their GEMV, fused-decode and golden tests, memcheck of b1all's golden ple_qsa, then tg 128 at 1K / 32K, two rounds
# against base34 (c34c014).
set -uo pipefail
R=$OUT/raw; mkdir -p $R
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
for v in hb1 b1all; do
  timeout 60 build/exp/imp_gpu_tests_$v --gtest_filter='*Golden*:GpuKernels.*:GpuDecodeFused.*:GpuHyperConnection*' > $R/tests_$v.txt 2>&1
  echo "tests $v rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED" $R/tests_$v.txt | head -3
done
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_b1all \
  --gtest_filter='*Golden*/ple_qsa:GpuDecodeFused.*' > $R/memcheck_b1all.txt 2>&1; echo "memcheck b1all rc=$?"; tail -1 $R/memcheck_b1all.txt
tar -czf $OUT/tests.tar.gz -C $R . && rm -rf $R
OUT=$OUT/ab VARIANTS="base34 hb1 b1all" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= \
  bash bench/tools/variants_visit.sh
