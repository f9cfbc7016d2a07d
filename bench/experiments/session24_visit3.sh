#!/usr/bin/env bash
# Session 24, visit 6: two ways to hide the MoE prefill GEMM blocks' fill and epilogue (~4.6 us a down block, ~7.9
# us a gate/up block after the bulk-copy change, against the k loop's probe), against tma (= 6354291):
# - mid64 = session24_moe_prefill_mid64_tiles.patch: tiles of up to 64 pairs at two blocks per SM up to 96 pairs
#   per slot (pp 4096 too: two tiles of ~40 pairs per slot, so each slot's weights are decoded twice);
# - persist = the working tree after 6354291: blocks of several items (gate/up 4, down 2) with one ring of stages,
#   the next item's first chunks loaded during the current item's last chunks and epilogue; down's partials stored
#   from the accumulators.
# Build here: bench/tools/build_variant.sh bench/experiments/session24_moe_prefill_mid64_tiles.patch mid64 (on
# 6354291), bench/tools/build_variant.sh - persist. Carry build/carry.tar.xz (build/exp/imp_{tma,mid64,persist},
# build/exp/imp_gpu_tests_{mid64,persist}, build/cuda/bin/lib, build/exp/lib, build/exp/libkernel_timeline.so).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
for v in persist mid64; do
  timeout 200 build/exp/imp_gpu_tests_$v --gtest_filter='*MoePrefill*:*Golden*:*Prefill*' > "$out/gpu_tests_$v.log" 2>&1
  echo "tests $v rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$out/gpu_tests_$v.log" | tr '\n' ' ')"
  grep -E "^\[  FAILED|Failure|rror" "$out/gpu_tests_$v.log" | head -6
done
timeout 100 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_persist \
  --gtest_filter='*MoePrefill*Tiny*:*Golden*/nvfp4' > "$out/memcheck_persist.log" 2>&1
echo "memcheck persist rc=$?: $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED)' "$out/memcheck_persist.log" | tr '\n' ' ')"
VARIANTS="tma mid64 persist" AB_ARGS="--pp 512,4096,16384 --tg 1 --context 1 --runs 5" timeout 330 bash bench/tools/variants_visit.sh
