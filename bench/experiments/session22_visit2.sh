#!/usr/bin/env bash
# Session 22, second visit: the NVFP4 codes packed for a rotate-and-mask decode (9 integer instructions per eight
# values instead of 15; values times 2^-126, the decode GEMVs' inputs lifted by 2^64, the prefill scales by 2^126).
# rot = the working tree with it, head = 10f7b02. Every GPU test and a memcheck subset on rot, then decode and
# prefill A/B in one bench command per run (pp 4096, tg 128 at 1K and 32K), two rounds.
# Build here first: (git stash; bench/tools/build_variant.sh - head; git stash pop; bench/tools/build_variant.sh - rot)
# Carry build/carry.tar.xz (build/exp/imp_{head,rot}, build/exp/imp_gpu_tests_rot, build/cuda/bin/lib).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
build/exp/imp_gpu_tests_rot > "$out/gpu_tests_rot.log" 2>&1
echo "tests rot rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$out/gpu_tests_rot.log" | tr '\n' ' ')"
grep -E "^\[  FAILED|golden-cuda" "$out/gpu_tests_rot.log" | head -20
timeout 120 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_rot \
  --gtest_filter='*MoeDecodeFused*:*Golden*/nvfp4:*Golden*/many_experts' > "$out/memcheck_rot.log" 2>&1
echo "memcheck rot rc=$?: $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED)' "$out/memcheck_rot.log" | tr '\n' ' ')"
VARIANTS="head rot" AB_ARGS="--pp 4096 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= bash bench/tools/variants_visit.sh
