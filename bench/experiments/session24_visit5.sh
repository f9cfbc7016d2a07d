#!/usr/bin/env bash
# Session 24, visit 8: persist2 = persist (session24_moe_prefill_persistent_items.patch, -11.5% in visit 7) with the
# block's items' tiles read once into shared memory instead of thread 0 reading a tile from global memory for every
# chunk's copies (between two block barriers: the whole block waited for that round trip each chunk), against tma
# (= 6354291). MoE prefill and golden tests, memcheck, A/B, a timeline. Little device time left: the short list.
# Build here: bench/tools/build_variant.sh - persist2 (the patch applied plus the change). Carry build/carry.tar.xz
# (build/exp/imp_{tma,persist2}, build/exp/imp_gpu_tests_persist2, build/cuda/bin/lib, build/exp/lib,
# build/exp/libkernel_timeline.so).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
timeout 120 build/exp/imp_gpu_tests_persist2 --gtest_filter='*MoePrefill*:*Golden*' > "$out/gpu_tests_persist2.log" 2>&1
echo "tests persist2 rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$out/gpu_tests_persist2.log" | tr '\n' ' ')"
grep -E "Failure|rror" "$out/gpu_tests_persist2.log" | head -6
timeout 90 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_persist2 \
  --gtest_filter='*MoePrefill*Tiny*:*Golden*/nvfp4' > "$out/memcheck_persist2.log" 2>&1
echo "memcheck persist2 rc=$?: $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED)' "$out/memcheck_persist2.log" | tr '\n' ' ')"
VARIANTS="tma persist2" TL_VARIANTS="persist2" AB_ARGS="--pp 512,4096,16384 --tg 1 --context 1 --runs 5" timeout 280 bash bench/tools/variants_visit.sh
