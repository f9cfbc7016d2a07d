#!/usr/bin/env bash
# Session 21, visit 3: the decode MoE gate/up on one block per SM with whole strips spread evenly (the tree, "su")
# against eb1dd79 ("head").
# Build here first: bench/tools/build_variant.sh - su (the tree); build/exp/imp_head from eb1dd79; build/probes/moe_phase_su
# (moe_phase_probe.cu on the tree). Carry build/carry.tar.xz (build/exp/imp_{head,su}, build/exp/imp_gpu_tests_su,
# build/cuda/bin/lib, build/probes/moe_phase_su).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
build/probes/moe_phase_su > "$out/moe_phase_su.txt" 2>&1; echo "== moe_phase_su"; cat "$out/moe_phase_su.txt"
build/probes/moe_phase_su gate_up > "$out/moe_phase_su_gate_up.txt" 2>&1; cat "$out/moe_phase_su_gate_up.txt"
build/exp/imp_gpu_tests_su > "$out/gpu_tests_su.log" 2>&1
echo "tests su rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$out/gpu_tests_su.log" | tr '\n' ' ')"; grep -E "FAILED|golden-cuda" "$out/gpu_tests_su.log" | head -20
/usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_su \
  --gtest_filter='*MoeDecodeFused*:*Golden*/nvfp4' > "$out/memcheck_su.log" 2>&1
echo "memcheck su rc=$?: $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED)' "$out/memcheck_su.log" | tr '\n' ' ')"
VARIANTS="head su" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= bash bench/tools/variants_visit.sh
