#!/usr/bin/env bash
# Session 20, visit 3: the router's counts in four independent sums (rl2, on top of rl): its MoE phase probe, its
# GPU tests and a decode A/B against rl; and the probe with gate/up's decode and MMAs left out (nocomp: wrong
# sums, timing only), to split gate/up's post-routing time between the data and the compute. Carry
# build/carry.tar.xz (build/exp/imp_{rl,rl2}, build/exp/imp_gpu_tests_rl2, build/probes/moe_phase_{rl2,nocomp},
# build/cuda/bin/lib).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
for p in moe_phase_rl2 moe_phase_nocomp; do
  echo "== $p"; build/probes/$p 2>&1 | tee "$out/$p.txt" | grep -E "layers|step [125]|SMs"
  echo "== $p gate_up"; build/probes/$p gate_up 2>&1 | tee "$out/${p}_gate_up.txt" | grep -E "layers|step [125]|SMs"
done
build/exp/imp_gpu_tests_rl2 --gtest_filter='*Moe*:*Router*:*Golden*:*Expert*' > "$out/gpu_tests_rl2.log" 2>&1
echo "tests rl2 rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$out/gpu_tests_rl2.log" | tr '\n' ' ')"
VARIANTS="rl rl2" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= bash bench/tools/variants_visit.sh
