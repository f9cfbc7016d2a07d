#!/usr/bin/env bash
# Session 20, visit 4: gate/up's weights by four bulk (TMA) copies per warp on an mbarrier instead of per-lane
# cp.async (bk, on top of rl): its MoE phase probe, GPU tests (MoE, router, expert, golden) and memcheck of the
# MoE tests, and a decode A/B against rl. Carry build/carry.tar.xz (build/exp/imp_{rl,bk},
# build/exp/imp_gpu_tests_bk, build/probes/moe_phase_bk, build/cuda/bin/lib).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
for p in moe_phase_bk; do
  echo "== $p"; build/probes/$p 2>&1 | tee "$out/$p.txt" | grep -E "layers|step [125]|SMs"
  echo "== $p gate_up"; build/probes/$p gate_up 2>&1 | tee "$out/${p}_gate_up.txt" | grep -E "layers|step [125]|SMs"
done
build/exp/imp_gpu_tests_bk --gtest_filter='*Moe*:*Router*:*Golden*:*Expert*' > "$out/gpu_tests_bk.log" 2>&1
echo "tests bk rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$out/gpu_tests_bk.log" | tr '\n' ' ')"
timeout 240 compute-sanitizer --tool memcheck build/exp/imp_gpu_tests_bk \
  --gtest_filter='*MoeDecodeFused*:*Expert*:*Golden*/nvfp4:*Golden*/many_experts' > "$out/memcheck_bk.log" 2>&1
echo "memcheck bk rc=$?: $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$out/memcheck_bk.log" | tail -3 | tr '\n' ' ')"
VARIANTS="rl bk" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= bash bench/tools/variants_visit.sh
