#!/usr/bin/env bash
# Session 28, visit 2: the chunked GDN prefill scan on wgmma (session28_gdn_scan_wgmma.patch: one warpgroup per
# (head, 64-column slice), S^T in accumulators, W and Kp written by prep as bf16 images, bulk-copied stages) and
# the two QSA selection patches of visit 1 together (pbx = session27_qsa_select_position_before_wait.patch +
# session27_qsa_select_one_exchange.patch). Steps: wscan's GDN, prefill and golden tests; memcheck of the GDN prefill
# tests; the scan phase probe (gdn_scan_phase_probe.cu) of head30 and wscan; pbx's QSA and golden tests; the A/B
# of head30, wscan, pbx (pp 4096, tg 128 at 32K; two rounds).
# Build here first: bench/tools/build_variant.sh - head30; ... session28_gdn_scan_wgmma.patch wscan; ...
# session27_qsa_select_position_before_wait.patch+bench/experiments/session27_qsa_select_one_exchange.patch pbx;
# the probes as gdn_scan_phase_probe.cu's header says, into build/exp/gdn_probe_{head30,wscan} (wscan's with the
# patch applied).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
timeout 240 build/exp/imp_gpu_tests_wscan --gtest_filter='*GatedDeltaNet*:*Golden*:*Prefill*' > "$out/gpu_tests_wscan.log" 2>&1
echo "wscan gdn+prefill+golden tests rc=$?"; grep -E "FAILED|PASSED|gdn prefill|golden-cuda" "$out/gpu_tests_wscan.log" | tail -40
timeout 240 compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_wscan \
  --gtest_filter='GpuGatedDeltaNetPrefill.ChunkedMatchesCpuAtSmallShapes:GpuGatedDeltaNetPrefill.TwoCallsMatchOneAtReleasedShapes' \
  > "$out/memcheck_wscan.log" 2>&1
echo "wscan memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$out/memcheck_wscan.log" | tail -3
for v in head30 wscan; do echo "== gdn scan probe $v"; timeout 60 build/exp/gdn_probe_$v 2>&1 | tee "$out/gdn_probe_$v.txt" | tail -12; done
timeout 120 build/exp/imp_gpu_tests_pbx --gtest_filter='*GpuQsa*:*Golden*' > "$out/gpu_tests_pbx.log" 2>&1
echo "pbx qsa+golden tests rc=$?"; grep -E "FAILED|PASSED" "$out/gpu_tests_pbx.log" | tail -3
VARIANTS="head30 wscan pbx" TL_VARIANTS="" AB_ARGS="--pp 4096 --tg 128 --context 32768 --runs 5" bash bench/tools/variants_visit.sh
