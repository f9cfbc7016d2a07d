#!/usr/bin/env bash
# Session 28, visit 4: the committed wgmma GDN scan (head31 = c771323) against two follow-ups:
#   wscan3 (session28_gdn_scan_snapshot_order.patch): the state snapshots in the scan's accumulator order (coalesced
#          float4 stores; the output kernel reorders them into shared memory) and prep's Kp image words written in
#          image order (coalesced);
#   wscan4 (session28_gdn_scan_accumulator_order.patch): wscan3 with V' in accumulator order too.
# Steps: each variant's GDN, prefill and golden tests; memcheck of the GDN prefill tests; the scan phase probe; the
# A/B (pp 512, 4096, 16384; two rounds); prefill timelines (the GDN kernels printed).
# Build here first: bench/tools/build_variant.sh - head31; ... PATCH wscan3; ... PATCH wscan4; the probes as
# gdn_scan_phase_probe.cu's header says with each patch applied, into build/exp/gdn_probe_{wscan3,wscan4}; carry
# build/exp/lib and build/exp/libkernel_timeline.so.
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
for v in wscan3 wscan4; do
  timeout 240 build/exp/imp_gpu_tests_$v --gtest_filter='*GatedDeltaNet*:*Golden*:*Prefill*' > "$out/gpu_tests_$v.log" 2>&1
  echo "$v gdn+prefill+golden tests rc=$?"; grep -E "FAILED|PASSED|gdn prefill T=(640|257|300 .split 100)|golden-cuda.*(long|chat)" "$out/gpu_tests_$v.log" | tail -8
  timeout 240 compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_$v \
    --gtest_filter='GpuGatedDeltaNetPrefill.ChunkedMatchesCpuAtSmallShapes:GpuGatedDeltaNetPrefill.TwoCallsMatchOneAtReleasedShapes' \
    > "$out/memcheck_$v.log" 2>&1
  echo "$v memcheck rc=$?"; grep -E "ERROR SUMMARY" "$out/memcheck_$v.log" | tail -1
  echo "== gdn scan probe $v"; timeout 60 build/exp/gdn_probe_$v 2>&1 | tee "$out/gdn_probe_$v.txt" | tail -9
done
VARIANTS="head31 wscan3 wscan4" TL_PATTERN="^(chunk_|steps)" AB_ARGS="--pp 512,4096,16384 --tg 1 --context 1 --runs 5" bash bench/tools/variants_visit.sh
