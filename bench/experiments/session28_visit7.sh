#!/usr/bin/env bash
# Session 28, visit 7: the GDN prefill output kernel on wgmma (wout = head32 + session28_gdn_out_wgmma.patch: prep
# writes Qg and Aqk as A images, the scan writes its snapshots and V' as per-slice B images, one warpgroup per
# (chunk, head) runs 3 dk / 16 + 12 wgmmas per 64-column slice from bulk-copied images, then the gated norm).
# Steps: its GDN, prefill and golden tests; memcheck of the GDN prefill small shapes; pp 4096 A/B against head32
# (two rounds); a prefill timeline of wout (the GDN kernels printed).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
timeout 120 build/exp/imp_gpu_tests_wout --gtest_filter='*GatedDeltaNet*:*Golden*:*Prefill*' > "$out/gpu_tests_wout.log" 2>&1
echo "wout tests rc=$?"; grep -E "FAILED|PASSED|gdn prefill T=(640|257|300 .split 100|100)|golden-cuda.*(long|chat)" "$out/gpu_tests_wout.log" | tail -10
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_wout \
  --gtest_filter='GpuGatedDeltaNetPrefill.ChunkedMatchesCpuAtSmallShapes' > "$out/memcheck_wout.log" 2>&1
echo "wout memcheck rc=$?"; grep -E "ERROR SUMMARY" "$out/memcheck_wout.log" | tail -1
VARIANTS="head32 wout" TL_VARIANTS="wout" TL_PATTERN="^(chunk_|steps)" AB_ARGS="--pp 4096 --tg 1 --context 1 --runs 5" bash bench/tools/variants_visit.sh
