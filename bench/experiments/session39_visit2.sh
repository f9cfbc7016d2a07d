#!/usr/bin/env bash
# Session 39, visit 2: the tree with the kept change (built as build/exp/imp_land, imp_gpu_tests_land; the base as
# imp_main): the whole GPU suite, memcheck of the QSA selection and golden ple_qsa / long_sparse tests, decode at
# 1K / 32K against the base in two more rounds, then the issue's full bench (pp 512 / 4096 / 16384, tg 128 / 512).
# Carry build/exp/{imp_main,imp_land,imp_gpu_tests_land,*.label} and build/cuda/bin/lib as build/carry.tar.xz; run
# `tar -xJf build/carry.tar.xz && timeout 580 bash <this>`.
set -uo pipefail
R=$OUT/raw; mkdir -p $R
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
CFG=bench/configs/qwen3.8-flash-next.json
timeout 200 build/exp/imp_gpu_tests_land > $R/gpu_tests.log 2>&1; echo "gpu tests rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED|golden-cuda" $R/gpu_tests.log | tail -12
timeout 110 compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_land \
  --gtest_filter='GpuQsa.SelectionMatchesCpuAtReleasedShapes:GpuQsa.SelectionMatchesCpuBeyondTheCluster:*Golden*/ple_qsa:*Golden*/long_sparse' \
  > $R/memcheck.log 2>&1; echo "memcheck rc=$?: $(tail -1 $R/memcheck.log)"
for round in 1 2; do
  for v in main land; do
    IMP_COMMIT="$(cat build/exp/imp_$v.label)" timeout 40 build/exp/imp_$v bench --dummy $CFG --backend cuda --pp 1 --tg 128 \
      --context 1024,32768 --runs 5 --out "$R/bench_${v}_$round.json" > /dev/null 2> "$R/bench_${v}_$round.log"
    echo "r$round $v rc=$?: $(grep -E 'tg ' "$R/bench_${v}_$round.log" | sed 's/.*at context *//' | cut -c1-40 | tr '\n' ' ')"
  done
done
IMP_COMMIT="$(cat build/exp/imp_land.label)" timeout 150 build/exp/imp_land bench --dummy $CFG --backend cuda \
  --pp 512,4096,16384 --tg 128,512 --context 1024,32768 --runs 5 --out "$R/bench_full.json" > /dev/null 2> "$R/bench_full.log"
echo "full bench rc=$?"; grep -E "pp |tg |roofline" "$R/bench_full.log" | cut -c12-140
tar -czf $OUT/raw.tar.gz -C $R . && rm -rf $R
