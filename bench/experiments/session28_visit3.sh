#!/usr/bin/env bash
# Session 28, visit 3: the wgmma GDN scan with its U slices one bulk copy each (visit 2's copy per 256-byte U row
# took ~2.8 us per chunk to issue) and the V' and state stores under the state update's products (wscan2 =
# session28_gdn_scan_wgmma.patch as of this visit). Steps: its GDN, prefill and golden tests; memcheck of the GDN
# prefill tests; the scan phase probe; the A/B of head30 and wscan2 (pp 512, 4096 and 16384; two rounds);
# prefill timelines of both (the GDN kernels printed).
# Build here first: bench/tools/build_variant.sh - head30; ... session28_gdn_scan_wgmma.patch wscan2; the probe as
# gdn_scan_phase_probe.cu's header says with the patch applied, into build/exp/gdn_probe_wscan2; carry
# build/exp/lib and build/exp/libkernel_timeline.so for the timelines.
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
timeout 240 build/exp/imp_gpu_tests_wscan2 --gtest_filter='*GatedDeltaNet*:*Golden*:*Prefill*' > "$out/gpu_tests_wscan2.log" 2>&1
echo "wscan2 gdn+prefill+golden tests rc=$?"; grep -E "FAILED|PASSED|gdn prefill|golden-cuda" "$out/gpu_tests_wscan2.log" | tail -40
timeout 240 compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_wscan2 \
  --gtest_filter='GpuGatedDeltaNetPrefill.ChunkedMatchesCpuAtSmallShapes:GpuGatedDeltaNetPrefill.TwoCallsMatchOneAtReleasedShapes' \
  > "$out/memcheck_wscan2.log" 2>&1
echo "wscan2 memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$out/memcheck_wscan2.log" | tail -3
echo "== gdn scan probe wscan2"; timeout 60 build/exp/gdn_probe_wscan2 2>&1 | tee "$out/gdn_probe_wscan2.txt" | tail -12
VARIANTS="head30 wscan2" TL_PATTERN="^(chunk_|steps)" AB_ARGS="--pp 512,4096,16384 --tg 1 --context 1 --runs 5" bash bench/tools/variants_visit.sh
