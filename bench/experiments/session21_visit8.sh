#!/usr/bin/env bash
# Session 21, visit 8: the QSA decode selection with its keys staged in shared memory and one histogram atomic per
# distinct digit and warp (qs = the tree) against head (eb1dd79). The 32K timeline (visit 7) had qsa_select 12.1 us
# on the critical path of each attention layer.
# Carry build/carry.tar.xz (build/exp/imp_{head,qs}, build/exp/imp_gpu_tests_qs, build/cuda/bin/lib).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
build/exp/imp_gpu_tests_qs --gtest_filter='*Qsa*:*Attention*:*Golden*:*DecodeFused*' > "$out/gpu_tests_qs.log" 2>&1
echo "tests qs rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$out/gpu_tests_qs.log" | tr '\n' ' ')"
grep -E "FAILED|golden-cuda|OK \] GpuQsa" "$out/gpu_tests_qs.log" | head -30
timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_qs \
  --gtest_filter='GpuQsa.SelectionMatchesCpuAtReleasedShapes:GpuQsa.SelectionMatchesCpuWithManyTies:GpuQsa.RowsSelectionMatchesCpuAtRatioEight:*Golden*/long_sparse:*Golden*/ple_qsa' \
  > "$out/memcheck_qs.log" 2>&1
echo "memcheck qs rc=$?: $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED)' "$out/memcheck_qs.log" | tr '\n' ' ')"
VARIANTS="head qs" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= bash bench/tools/variants_visit.sh
