#!/usr/bin/env bash
# Session 39, visit 1: prepared variants against the tree (42c5481 = 3c53703's src):
# - fin: bench/experiments/session38_qsa_select_one_exchange.patch (the cluster selection's final phase with one
#   scan and one cluster exchange of (above << 16) | ties instead of two of each);
# - gorder: bench/experiments/session36_gdn_gate_capture_order.patch (GDN's gate GEMV captured after the recurrent
#   step instead of before the in-projection);
# - digfin: bench/experiments/session39_qsa_first_digit_one_exchange.patch (fin, and the score kernels count the
#   first 11 bits of the scores' order keys into a global histogram, so the cluster selection starts from that
#   digit: 8 + 8 + 5 bits left instead of 8 x 4);
# - pipe: bench/experiments/session39_attention_next_tile_loads.patch (the tensor-core partial kernel issues the
#   next tile's loads before this tile's MMAs; 87 registers, no spill);
# - all: digfin and pipe.
# Decode at 1K / 32K in three rounds (medians of 5) first; then the whole GPU suite of `all`, fin's QSA / golden
# and gorder's golden tests, and memcheck of all's QSA selection, attention and golden long_sparse tests.
# Build: bench/tools/build_variant.sh - main; ... PATCH NAME for each (all: digfin's patch + pipe's). Carry
# build/exp/{imp_*,imp_gpu_tests_{fin,gorder,all},*.label} and build/cuda/bin/lib as build/carry.tar.xz; run
# `tar -xJf build/carry.tar.xz && timeout 580 bash <this>`.
set -uo pipefail
R=$OUT/raw; mkdir -p $R
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
for round in 1 2 3; do
  for v in main fin gorder digfin pipe all; do
    IMP_COMMIT="$(cat build/exp/imp_$v.label)" timeout 40 build/exp/imp_$v bench --dummy bench/configs/qwen3.8-flash-next.json \
      --backend cuda --pp 1 --tg 128 --context 1024,32768 --runs 5 --out "$R/bench_${v}_$round.json" > /dev/null 2> "$R/bench_${v}_$round.log"
    echo "r$round $v rc=$?: $(grep -E 'tg ' "$R/bench_${v}_$round.log" | sed 's/.*at context *//' | cut -c1-40 | tr '\n' ' ')"
  done
done
timeout 170 build/exp/imp_gpu_tests_all > $R/gpu_tests_all.log 2>&1; echo "all suite rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED|golden-cuda" $R/gpu_tests_all.log | tail -12
timeout 40 build/exp/imp_gpu_tests_fin --gtest_filter='GpuQsa*:*Golden*/long_sparse:*Golden*/ple_qsa' > $R/tests_fin.log 2>&1
echo "fin tests rc=$?: $(grep -E '^\[  (PASSED|FAILED)' $R/tests_fin.log | tr '\n' ' ')"
timeout 40 build/exp/imp_gpu_tests_gorder --gtest_filter='*Golden*' > $R/tests_gorder.log 2>&1
echo "gorder tests rc=$?: $(grep -E '^\[  (PASSED|FAILED)' $R/tests_gorder.log | tr '\n' ' ')"
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_all \
  --gtest_filter='GpuQsa.SelectionMatchesCpuAtReleasedShapes:GpuQsa.SelectionMatchesCpuBeyondTheCluster:GpuAttentionKernel.Selected2051Tokens:*Golden*/long_sparse' \
  > $R/memcheck_all.log 2>&1; echo "memcheck all rc=$?: $(tail -1 $R/memcheck_all.log)"
tar -czf $OUT/raw.tar.gz -C $R . && rm -rf $R
