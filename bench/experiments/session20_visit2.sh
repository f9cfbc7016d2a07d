#!/usr/bin/env bash
# Session 20, visit 2: the router's logits loaded all at once (rl) and, on top, gate/up's second commit group
# issued once the first has landed (rlst): the MoE phase probe of each, their GPU tests, the router's SASS, and a
# decode A/B against the tree (base). Carry build/carry.tar.xz (build/exp/imp_{base,rl,rlst},
# build/exp/imp_gpu_tests_{rl,rlst}, build/probes/moe_phase{,_rl,_rlst}, build/cuda/bin/lib).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
for p in moe_phase moe_phase_rl moe_phase_rlst; do
  echo "== $p"; build/probes/$p 2>&1 | tee "$out/$p.txt" | grep -E "layers|step [125]|SMs"
  echo "== $p gate_up"; build/probes/$p gate_up 2>&1 | tee "$out/${p}_gate_up.txt" | grep -E "layers|step [125]"
done
cuobjdump -sass build/probes/moe_phase_rl > "$out/sass_moe_phase_rl.txt" 2>&1
cuobjdump -sass build/probes/moe_phase_rlst > "$out/sass_moe_phase_rlst.txt" 2>&1
for v in rl rlst; do
  build/exp/imp_gpu_tests_$v --gtest_filter='*Moe*:*Router*:*Golden*:*Expert*' > "$out/gpu_tests_$v.log" 2>&1
  echo "tests $v rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$out/gpu_tests_$v.log" | tr '\n' ' ')"
done
VARIANTS="base rl rlst" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= bash bench/tools/variants_visit.sh
