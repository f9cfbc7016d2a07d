#!/usr/bin/env bash
# Session 25, visit 2: the MoE prefill GEMMs with a producer warpgroup (full and empty barriers per stage, no block
# barrier per chunk; "prod", the tree at 489adf0 plus the uncommitted change) and the same with eight wide stages
# ("prod8", session25_moe_prefill_eight_wide_stages.patch), against the head ("head25", 996d066). Their MoE
# prefill, prefill and golden GPU tests, memcheck and synccheck of the MoE prefill tests, then the A/B and
# timelines.
# Build here: bench/tools/build_variant.sh - prod; the patch as prod8; carry imp{,_gpu_tests}_{head25,prod,prod8}.
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
for v in prod prod8; do
  build/exp/imp_gpu_tests_$v --gtest_filter="*MoePrefill*:*Golden*:*Prefill*" > "$out/gpu_tests_$v.log" 2>&1
  echo "gpu tests $v rc=$?"; grep -E "golden-cuda.*(nvfp4|long_sparse)|FAILED|PASSED" "$out/gpu_tests_$v.log" | tail -8
done
for tool in memcheck synccheck; do
  timeout 240 compute-sanitizer --tool $tool --error-exitcode 3 build/exp/imp_gpu_tests_prod \
    --gtest_filter='*MoePrefill*Tiny*' > "$out/${tool}_prod.log" 2>&1
  echo "$tool prod rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$out/${tool}_prod.log" | tail -3
done
VARIANTS="head25 prod prod8" AB_ARGS="--pp 512,4096,16384 --tg 1 --context 1 --runs 5" \
  bash bench/tools/variants_visit.sh  # packs everything in $OUT into visit_outputs.tar.gz
