#!/usr/bin/env bash
# Session 28, visit 6: the final tree (head32 = 27e236f: wgmma_layout.cuh shared by the attention, MoE and GDN
# prefill kernels; attention and MoE PTX unchanged, the GDN prefill's offsets now by division instead of shifts):
# its prefill-related GPU tests and memcheck of the GDN prefill tests, then pp 4096 against head31 (c771323), two
# rounds.
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
timeout 240 build/exp/imp_gpu_tests_head32 --gtest_filter='*GatedDeltaNet*:*Golden*:*Prefill*:*Attention*:*Moe*' > "$out/gpu_tests_head32.log" 2>&1
echo "head32 tests rc=$?"; grep -E "FAILED|PASSED|golden-cuda.*(long|chat)" "$out/gpu_tests_head32.log" | tail -6
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_head32 \
  --gtest_filter='GpuGatedDeltaNetPrefill.ChunkedMatchesCpuAtSmallShapes' > "$out/memcheck_head32.log" 2>&1
echo "head32 memcheck rc=$?"; grep -E "ERROR SUMMARY" "$out/memcheck_head32.log" | tail -1
VARIANTS="head31 head32" TL_VARIANTS="" AB_ARGS="--pp 4096 --tg 1 --context 1 --runs 5" bash bench/tools/variants_visit.sh
