#!/usr/bin/env bash
# Session 20, visit 5: gate/up's weights block in grid row 0 (dispatched first) instead of row k (wf): its MoE
# phase probe, GPU tests of the MoE kernels and golden, and a decode A/B against the committed tree (head); the
# attention phase probe of the current kernels at 1K and 32K, for the record. Carry build/carry.tar.xz
# (build/exp/imp_{head,wf}, build/exp/imp_gpu_tests_wf, build/probes/{moe_phase_wf,attention_phase},
# build/cuda/bin/lib).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
echo "== moe_phase_wf"; build/probes/moe_phase_wf 2>&1 | tee "$out/moe_phase_wf.txt" | grep -E "layers|step [0125]|SMs"
for c in 1024 32768; do
  echo "== attention_phase $c"; build/probes/attention_phase $c 2>&1 | tee "$out/attention_phase_$c.txt"
done
build/exp/imp_gpu_tests_wf --gtest_filter='*Moe*:*Router*:*Golden*:*Expert*' > "$out/gpu_tests_wf.log" 2>&1
echo "tests wf rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$out/gpu_tests_wf.log" | tr '\n' ' ')"
VARIANTS="head wf" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= bash bench/tools/variants_visit.sh
