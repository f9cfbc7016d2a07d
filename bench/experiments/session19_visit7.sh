#!/usr/bin/env bash
# Session 19, seventh visit: as the sixth (session19_visit6.sh) with 1 load per lane: hcw1 (v_hcw1.patch, the output
# projection only) and g1 (v_gemv_batch1.patch: every decode GEMV); tests of g1, then the decode A/B.
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
for v in g1; do
  build/exp/imp_gpu_tests_$v --gtest_filter='*DecodeFused*:*Golden*' > "$out/gpu_tests_$v.log" 2>&1
  echo "$v tests rc=$? (${SECONDS}s)"; grep -E "FAILED|PASSED" "$out/gpu_tests_$v.log" | tail -4
done
VARIANTS="head hcw1 g1" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= \
  bash bench/tools/variants_visit.sh
