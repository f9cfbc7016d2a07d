#!/usr/bin/env bash
# Session 35, visit 5: ib2 (the tree since this session's commit of it; the patch file is gone) = ib with the index branch at the highest
# stream priority and the main chain one level below (the gate branch stays lowest). Visit 4's 32K timeline of ib
# has the branch's one-block prep entering ~5 us after the index GEMV ended, the scores taking 14.5 us beside the
# bulk GEMVs and the cluster selection placed late: its blocks queued behind the in-projection's. A/B against base35
# at 1K / 32K (two rounds), then the whole GPU suite of ib2 and memcheck on its attention / golden ple_qsa tests.
set -uo pipefail
R=$OUT/raw; mkdir -p $R
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
OUT=$OUT/ab VARIANTS="base35 ib2" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= \
  bash bench/tools/variants_visit.sh
timeout 170 build/exp/imp_gpu_tests_ib2 > $R/gpu_tests_ib2.log 2>&1; echo "gpu tests ib2 rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED" $R/gpu_tests_ib2.log | tail -5
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_ib2 \
  --gtest_filter='GpuAttention.*:*Golden*/ple_qsa:*Golden*/long_sparse' > $R/memcheck_ib2.log 2>&1; echo "memcheck rc=$?"; tail -1 $R/memcheck_ib2.log
tar -czf $OUT/tests.tar.gz -C $R . && rm -rf $R
