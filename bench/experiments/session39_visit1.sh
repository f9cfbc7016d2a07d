#!/usr/bin/env bash
# Session 39, visit 1: two prepared variants against the tree (df83e24 = 3c53703's src):
# - fin: bench/experiments/session38_qsa_select_one_exchange.patch (the cluster selection's final phase with one
#   scan and one cluster exchange of (above << 16) | ties instead of two of each): its QSA and golden tests and a
#   memcheck of the QSA selection tests;
# - gorder: bench/experiments/session36_gdn_gate_capture_order.patch (GDN's gate GEMV captured after the recurrent
#   step instead of before the in-projection): its golden tests;
# - dig: bench/experiments/session39_qsa_first_digit_from_scores.patch (the score kernels count the first 11 bits of
#   the scores' order keys into a global histogram, so the cluster selection starts from that digit: 8 + 8 + 5 bits
#   left instead of 8 x 4); digfin: dig and fin together (session39_qsa_first_digit_one_exchange.patch): their QSA
#   and golden tests, memcheck of the QSA selection tests;
# - pipe: bench/experiments/session39_attention_next_tile_loads.patch (the tensor-core partial kernel issues the next
#   tile's loads before this tile's MMAs; 87 registers, no spill): its attention and golden tests;
# then decode at 1K / 32K, main / fin / gorder / dig / digfin / pipe in three rounds, medians of 5.
# Build: bench/tools/build_variant.sh - main; ... session38_qsa_select_one_exchange.patch fin; ...
#   session36_gdn_gate_capture_order.patch gorder; the two session 39 patches as dig and digfin. Carry
#   build/exp/{imp_*,imp_gpu_tests_{fin,gorder,dig,digfin,pipe},*.label} and
#   build/cuda/bin/lib as build/carry.tar.xz; run `tar -xJf build/carry.tar.xz && timeout 560 bash <this>`.
set -uo pipefail
R=$OUT/raw; mkdir -p $R
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
for v in fin dig digfin; do
  timeout 80 build/exp/imp_gpu_tests_$v --gtest_filter='GpuQsa*:*Golden*/long_sparse:*Golden*/ple_qsa' > $R/tests_$v.log 2>&1
  echo "$v tests rc=$?: $(grep -E '^\[  (PASSED|FAILED)' $R/tests_$v.log | tr '\n' ' ')"
done
timeout 80 build/exp/imp_gpu_tests_pipe --gtest_filter='GpuAttention*:*Golden*' > $R/tests_pipe.log 2>&1
echo "pipe tests rc=$?: $(grep -E '^\[  (PASSED|FAILED)' $R/tests_pipe.log | tr '\n' ' ')"
timeout 80 build/exp/imp_gpu_tests_gorder --gtest_filter='*Golden*' > $R/tests_gorder.log 2>&1
echo "gorder tests rc=$?: $(grep -E '^\[  (PASSED|FAILED)' $R/tests_gorder.log | tr '\n' ' ')"
for v in digfin; do
  timeout 100 compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_$v \
    --gtest_filter='GpuQsa.SelectionMatchesCpuAtReleasedShapes:GpuQsa.SelectionMatchesCpuBeyondTheCluster:*Golden*/long_sparse' \
    > $R/memcheck_$v.log 2>&1; echo "memcheck $v rc=$?: $(tail -1 $R/memcheck_$v.log)"
done
for round in 1 2 3; do
  for v in main fin gorder dig digfin pipe; do
    IMP_COMMIT="$(cat build/exp/imp_$v.label)" timeout 60 build/exp/imp_$v bench --dummy bench/configs/qwen3.8-flash-next.json \
      --backend cuda --pp 1 --tg 128 --context 1024,32768 --runs 5 --out "$R/bench_${v}_$round.json" > /dev/null 2> "$R/bench_${v}_$round.log"
    echo "r$round $v rc=$?: $(grep -E 'tg ' "$R/bench_${v}_$round.log" | sed 's/.*at context *//' | cut -c1-40 | tr '\n' ' ')"
  done
done
tar -czf $OUT/raw.tar.gz -C $R . && rm -rf $R
