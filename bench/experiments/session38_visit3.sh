#!/usr/bin/env bash
# Session 38, visit 3: fin (session38_qsa_select_one_exchange.patch: the cluster selection's final phase with one
# scan and one cluster exchange of (above << 16) | ties instead of two of each): its QSA and golden tests, memcheck
# of the QSA selection tests, then decode at 1K / 32K against the tree in three rounds, medians of 5.
set -uo pipefail
R=$OUT/raw; mkdir -p $R
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
timeout 80 build/exp/imp_gpu_tests_fin --gtest_filter='GpuQsa*:*Golden*/long_sparse:*Golden*/ple_qsa' > $R/tests_fin.log 2>&1
echo "fin tests rc=$?: $(grep -E '^\[  (PASSED|FAILED)|golden-cuda.*(long_sparse|ple_qsa)' $R/tests_fin.log | cut -c1-120 | tr '\n' ' ')"
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_fin \
  --gtest_filter='GpuQsa.SelectionMatchesCpuAtReleasedShapes:GpuQsa.SelectionMatchesCpuBeyondTheCluster:*Golden*/long_sparse' \
  > $R/memcheck_fin.log 2>&1; echo "memcheck rc=$?: $(tail -1 $R/memcheck_fin.log)"
for round in 1 2 3; do
  for v in main fin; do
    IMP_COMMIT="$(cat build/exp/imp_$v.label)" timeout 60 build/exp/imp_$v bench --dummy bench/configs/qwen3.8-flash-next.json \
      --backend cuda --pp 1 --tg 128 --context 1024,32768 --runs 5 --out "$R/bench_${v}_$round.json" > /dev/null 2> "$R/bench_${v}_$round.log"
    echo "r$round $v rc=$?: $(grep -E 'tg ' "$R/bench_${v}_$round.log" | sed 's/.*at context *//' | cut -c1-40 | tr '\n' ' ')"
  done
done
tar -czf $OUT/raw.tar.gz -C $R . && rm -rf $R
