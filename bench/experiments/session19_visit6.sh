#!/usr/bin/env bash
# Session 19, sixth visit: the decode output projection into the streams (gemv_bf16_hc_write_kernel, launched after
# the gate branch's join, so without PDL prefetch) with 4 or 6 weight loads per lane in flight instead of 2
# (bench/experiments/v_hcw4.patch, v_hcw6.patch on 06ae395 = head): their GPU tests (decode fused + golden), then a
# decode A/B (tg 128 at 1K and 32K, alternating, two rounds).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
for v in hcw4 hcw6; do
  build/exp/imp_gpu_tests_$v --gtest_filter='*DecodeFused*:*Golden*' > "$out/gpu_tests_$v.log" 2>&1
  echo "$v tests rc=$? (${SECONDS}s)"; grep -E "FAILED|PASSED" "$out/gpu_tests_$v.log" | tail -4
done
VARIANTS="head hcw4 hcw6" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= \
  bash bench/tools/variants_visit.sh
