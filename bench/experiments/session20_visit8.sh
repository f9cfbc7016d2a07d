#!/usr/bin/env bash
# Session 20, visit 8: the decode attention's partial kernel on tensor cores for bf16 pages
# (attention_decode_mma.cu; tc): all GPU tests, memcheck of the attention kernel tests and two golden fixtures,
# the attention phase probe (per-launch time; the new kernel has no phase stamps) and a decode A/B against
# 64f7b6d (head). Carry build/carry.tar.xz (build/exp/imp_{head,tc}, build/exp/imp_gpu_tests_tc,
# build/probes/attention_phase_tc, build/cuda/bin/lib).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
build/exp/imp_gpu_tests_tc > "$out/gpu_tests_tc.log" 2>&1
echo "tests tc rc=$?: $(grep -E '^\[  (PASSED|FAILED)|golden-cuda' "$out/gpu_tests_tc.log" | tr '\n' ' ')"
grep -E "^\[  FAILED|Failure|Expected|Which is|max_rel" "$out/gpu_tests_tc.log" | head -20
for c in 1024 32768; do
  echo "== attention_phase_tc $c"; build/probes/attention_phase_tc $c 2>&1 | tee "$out/attention_phase_tc_$c.txt" | head -2
done
timeout 200 compute-sanitizer --tool memcheck build/exp/imp_gpu_tests_tc \
  --gtest_filter='GpuAttentionKernel.*:GpuAttention.*:*Golden*/ple_qsa:*Golden*/long_sparse' > "$out/memcheck_tc.log" 2>&1
echo "memcheck tc rc=$?: $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$out/memcheck_tc.log" | tail -3 | tr '\n' ' ')"
VARIANTS="head tc" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= bash bench/tools/variants_visit.sh
